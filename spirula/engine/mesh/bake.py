"""Colour from the training images onto the mesh: a UV texture and vertex colours
(kernels: shaders/mesh/bake.slang).

Source: the training images, not renders of the splats. The photos are sharper than any
splat render (no Gaussian blur, no SH fitting error, no floaters in front of the surface);
the splats still decide visibility, through the depth test against their rendered depth
(a sample hidden behind other geometry in a view, or off the splat surface, takes no colour
from it). Per sample the views are blended with best-view weights (see the shader): the
most frontal, closest views dominate, which keeps the detail of the best photo while
averaging away small exposure changes.

After accumulation: texels inside charts that no camera saw take the barycentric blend of
the vertex colours (themselves filled from the nearest seen vertex in 3D); texels outside
every chart take the colour of the nearest chart texel (Euclidean distance transform), so
bilinear filtering and mip-mapping never pull in background across seams.

Masks (spirula/engine/ingest/masks.py; a camera's ``mask``, in either mode): a sample whose pixel is
masked out (weight below one half) takes no colour from that view, so a removed person or
tripod, or a cut-out's background, never reaches the texture.
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from ..device import Gpu
from ..ingest.images import quantize_u8
from .atlas import UvMesh


@dataclass
class BakeOptions:
    alpha_min: float = 0.5     # splat opacity needed at the pixel for it to count
    tol_abs: float = 0.01      # depth-test tolerance, world units (the job sets ~3 voxels)
    tol_rel: float = 0.01      # ... or this fraction of the depth, whichever is larger
    min_cos: float = 0.1       # skip views more grazing than ~84 degrees
    power: float = 4.0         # best-view sharpness (1: proportional to pixel density)
    border: int = 2            # ignore the outermost pixels of each image


@dataclass
class BakeResult:
    texture: np.ndarray        # [S, S, 3] uint8, row 0 at the top (v = 1)
    vertex_colors: np.ndarray  # [V, 3] uint8 of the input (non-split) vertices
    texel_coverage: float      # fraction of chart texels seen by at least one camera
    vertex_coverage: float     # fraction of vertices seen by at least one camera


def _view_arrays(cam_image: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """[H, W, 3] uint8 (and its [H, W] uint8 mask, None: every pixel kept) -> [H, W] uint32
    RGBA8, red in the low byte, the mask in alpha (255 without one)."""
    h, w, _ = cam_image.shape
    rgba = np.full((h, w, 4), 255, np.uint8)
    rgba[..., :3] = cam_image
    if mask is not None:
        rgba[..., 3] = mask
    return rgba.view(np.uint32)[..., 0]


def bake(gpu: Gpu, cams, cameras: list, get_depth: Callable[[int], tuple[np.ndarray, np.ndarray]],
         uv: UvMesh, normals: np.ndarray, size: int, opts: BakeOptions,
         on_progress: Callable[[int, int], None] | None = None,
         image_of: Callable[[int], np.ndarray] | None = None) -> BakeResult:
    """Bake ``uv`` (split vertices) into a ``size``^2 texture and colour its source vertices.

    cams: the uploaded camera table (row i = cameras[i]); cameras: objects with ``image``
    [H, W, 3] uint8, ``width``, ``height``, ``fx``, ``center`` and optionally ``mask`` ([H, W]
    uint8, 255 keep; masked-out pixels give no colour); get_depth(i) -> (depth,
    alpha) [H, W] float32 rendered splat maps of camera i; normals: [V, 3] unit vertex
    normals of the source mesh (V = number of source vertices); image_of(i): the colours to
    bake from camera i ([H, W, 3] uint8; default ``cameras[i].image``), e.g. the photo with
    its learned per-image appearance removed (spirula/engine/splat/appearance.remove_appearance).
    """
    num_src = int(uv.vmapping.max()) + 1 if len(uv.vmapping) else 0
    src_verts = np.zeros((num_src, 3))
    src_verts[uv.vmapping] = uv.vertices
    k_raster = gpu.kernel("mesh/bake", "uv_raster")
    k_tex = gpu.kernel("mesh/bake", "bake_texels")
    k_pts = gpu.kernel("mesh/bake", "bake_points")
    uvs_b = gpu.upload(uv.uvs.astype(np.float32))
    faces_b = gpu.upload(uv.faces.astype(np.uint32))
    pos_b = gpu.upload(uv.vertices.astype(np.float32))
    nrm_b = gpu.upload(normals[uv.vmapping].astype(np.float32))
    src_pos_b = gpu.upload(src_verts.astype(np.float32))
    src_nrm_b = gpu.upload(normals.astype(np.float32))
    texel_face = gpu.zeros(4 * size * size, "bake.texel_face")
    acc_tex = gpu.zeros(16 * size * size, "bake.accum")
    acc_pts = gpu.zeros(16 * max(num_src, 1), "bake.accum_points")
    enc = gpu.encoder()
    k_raster.dispatch(thread_count=[len(uv.faces), 1, 1], command_encoder=enc, uvs=uvs_b, faces=faces_b,
                      texel_face=texel_face, num_faces=len(uv.faces), size=size)
    gpu.submit(enc)
    centre = src_verts.mean(axis=0) if num_src else np.zeros(3)
    ref = float(np.median([c.fx / max(np.linalg.norm(c.center - centre), 1e-9) for c in cameras]))
    common = dict(cams=cams, alpha_min=opts.alpha_min, tol_abs=opts.tol_abs, tol_rel=opts.tol_rel,
                  min_cos=opts.min_cos, ref=ref, power=opts.power, border=opts.border)
    photos = (c.image for c in cameras) if image_of is None else _prefetched(image_of, len(cameras))
    for i, (cam, photo) in enumerate(zip(cameras, photos)):
        depth, alpha = get_depth(i)
        views = dict(image=gpu.upload(_view_arrays(photo, getattr(cam, "mask", None))), depth=gpu.upload(depth.astype(np.float32)),
                     alpha=gpu.upload(alpha.astype(np.float32)))
        enc = gpu.encoder()
        k_tex.dispatch(thread_count=[size, size, 1], command_encoder=enc, texel_face=texel_face, uvs=uvs_b,
                       faces=faces_b, positions=pos_b, normals=nrm_b, accum=acc_tex, cam_index=i, size=size,
                       **views, **common)
        if num_src:
            k_pts.dispatch(thread_count=[num_src, 1, 1], command_encoder=enc, positions=src_pos_b,
                           normals=src_nrm_b, accum=acc_pts, cam_index=i, count=num_src, **views, **common)
        gpu.submit(enc)
        gpu.device.wait_for_idle()  # the uploaded views must outlive the dispatch
        if on_progress is not None:
            on_progress(i + 1, len(cameras))
    face_of = gpu.read(texel_face, np.uint32, shape=(size, size)).astype(np.int64) - 1
    acc = gpu.read(acc_tex, np.float32, shape=(size, size, 4))
    vacc = gpu.read(acc_pts, np.float32, shape=(max(num_src, 1), 4))[:num_src]
    vcol, vseen = _resolve_points(vacc, src_verts)
    tex, tseen = _resolve_texture(acc, face_of, uv, vcol)
    chart = face_of >= 0
    return BakeResult(tex, vcol, float(tseen[chart].mean()) if chart.any() else 0.0,
                      float(vseen.mean()) if len(vseen) else 0.0)


def _prefetched(fn: Callable[[int], np.ndarray], count: int, workers: int = 4) -> Iterator[np.ndarray]:
    """fn(0), fn(1), ... fn(count - 1) in order, computed ``workers`` threads ahead of the
    consumer (NumPy releases the GIL in its array loops), at most 2 x workers pending: the
    appearance removal of the next photos runs while the GPU bakes the current one."""
    with ThreadPoolExecutor(max_workers=workers) as ex:
        pending = deque(ex.submit(fn, i) for i in range(min(2 * workers, count)))
        nxt = len(pending)
        for _ in range(count):
            out = pending.popleft().result()
            if nxt < count:
                pending.append(ex.submit(fn, nxt))
                nxt += 1
            yield out


def _resolve_points(acc: np.ndarray, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """([P, 3] uint8 colours, [P] bool seen): weighted means; unseen points take the colour
    of the nearest seen point (mid grey if none was seen)."""
    seen = acc[:, 3] > 0
    col = np.full((len(acc), 3), 0.5, np.float64)
    col[seen] = acc[seen, :3] / acc[seen, 3:4]
    if seen.any() and not seen.all():
        _, j = cKDTree(pts[seen]).query(pts[~seen])
        col[~seen] = col[seen][j]
    return quantize_u8(col), seen


def _resolve_texture(acc: np.ndarray, face_of: np.ndarray, uv: UvMesh, vcol: np.ndarray):
    """([S, S, 3] uint8 texture, [S, S] bool seen). Colours are quantized where they are
    made (weighted means, vertex-colour blends); the texels outside every chart copy the
    quantized colour of their nearest chart texel (one byte gather, not a float one)."""
    size = face_of.shape[0]
    seen = acc[..., 3] > 0
    out = np.zeros((size, size, 3), np.uint8)
    out[seen] = quantize_u8((acc[seen, :3] / acc[seen, 3:4]).astype(np.float64))
    hole = (face_of >= 0) & ~seen
    if hole.any():
        ys, xs = np.nonzero(hole)
        f = uv.faces[face_of[ys, xs]]
        t = np.stack([uv.uvs[f[:, k]] * [size, -size] + [0, size] for k in range(3)], 1)  # [n, 3, 2] texel units
        p = np.stack([xs + 0.5, ys + 0.5], 1)
        e0, e1, d = t[:, 1] - t[:, 0], t[:, 2] - t[:, 0], p - t[:, 0]
        area = e0[:, 0] * e1[:, 1] - e0[:, 1] * e1[:, 0]
        inv = np.where(np.abs(area) > 1e-20, 1.0 / np.where(area == 0, 1, area), 0.0)
        l1 = (d[:, 0] * e1[:, 1] - d[:, 1] * e1[:, 0]) * inv
        l2 = (e0[:, 0] * d[:, 1] - e0[:, 1] * d[:, 0]) * inv
        b = np.clip(np.stack([1 - l1 - l2, l1, l2], 1), 0, None)
        b /= np.maximum(b.sum(1, keepdims=True), 1e-12)
        vc = vcol[uv.vmapping].astype(np.float64) / 255.0
        out[ys, xs] = quantize_u8((b[:, :, None] * vc[f]).sum(1))
    filled = face_of >= 0
    if filled.any() and not filled.all():
        idx = ndimage.distance_transform_edt(~filled, return_distances=False, return_indices=True)
        out = out[idx[0], idx[1]]
    return out, seen
