"""Faces some camera sees as the front surface (kernels: shaders/mesh/visible.slang, with
the depth pass of the viewer's triangle rasteriser, shaders/view/mesh.slang).

TSDF fusion of depth maps that disagree by more than the truncation band leaves sheets
inside solid objects (on the object-on-table scene of tests/mesh, 10% of the faces lay
more than 6 mm inside the box, and 98% of the open edges were theirs). They are connected
to the outer surface, so component removal keeps them, and their holes keep the mesh
from closing. No camera sees them: in every view the object's outer surface is in front.
"""

from __future__ import annotations

import numpy as np
import slangpy as spy

from ..device import Gpu


def visible_faces(gpu: Gpu, verts: np.ndarray, faces: np.ndarray, cams: spy.Buffer,
                  sizes: list[tuple[int, int]], tol_abs: float, on_progress=None) -> np.ndarray:
    """[F] bool: faces that at least one camera sees in front (or within ``tol_abs`` world
    units plus the face's own depth extent of the front surface) at its centroid's pixel.

    verts [V, 3] world, faces [F, 3] int; cams: the uploaded camera table
    (engine/splat/camera_table.py) whose rows 0..len(sizes)-1 are the views, each
    (width, height) pixels; on_progress(done, total) after each view."""
    n = len(faces)
    if n == 0:
        return np.zeros(0, bool)
    k_depth = gpu.kernel("view/mesh", "raster_tris")
    k_mark = gpu.kernel("mesh/visible", "mark_visible")
    v = gpu.upload(np.ascontiguousarray(verts, np.float32), "mesh.visible.verts")
    f = gpu.upload(np.ascontiguousarray(faces, np.uint32), "mesh.visible.faces")
    seen = gpu.zeros(4 * n, "mesh.visible.flags")
    depth = gpu.zeros(4 * max(w * h for w, h in sizes), "mesh.visible.depth")
    ids = gpu.zeros(16, "mesh.visible.ids")   # pass 0 writes no ids
    for i, (w, h) in enumerate(sizes):
        enc = gpu.encoder()
        gpu.clear(enc, depth)
        k_depth.dispatch(thread_count=[n, 1, 1], command_encoder=enc, verts=v, faces=f, cams=cams, depth=depth,
                         ids=ids, cam_index=i, num_faces=n, pass_index=0, out_w=w, out_h=h)
        k_mark.dispatch(thread_count=[n, 1, 1], command_encoder=enc, verts=v, faces=f, cams=cams, depth=depth,
                        visible=seen, cam_index=i, num_faces=n, out_w=w, out_h=h, tol_abs=float(tol_abs))
        gpu.submit(enc)
        if on_progress is not None:
            on_progress(i + 1, len(sizes))
    return gpu.read(seen, np.uint32, n) > 0
