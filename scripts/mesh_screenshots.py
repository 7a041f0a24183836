#!/usr/bin/env python3
"""Render a textured mesh (GLB or OBJ from `spirula mesh`, or its
PLY with colours per vertex) from four views around it to
PNG, on the CPU (spirula/engine/mesh/preview.py):

    .venv/bin/python scripts/mesh_screenshots.py <project>/exports/mesh.glb docs/screenshots/<name>
        [--size 480] [--up 0 0 1] [--elevation 25]

writes <prefix>_0.png .. <prefix>_3.png and <prefix>_views.png (the four side by side).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mesh", type=Path)
    ap.add_argument("prefix", type=Path)
    ap.add_argument("--size", type=int, default=480)
    ap.add_argument("--up", type=float, nargs=3, default=None, help="world up direction (default +z)")
    ap.add_argument("--dataset", type=Path, help="take 'up' from the dataset's cameras (mean of their -y axes)")
    ap.add_argument("--elevation", type=float, default=25.0)
    a = ap.parse_args()
    import trimesh

    from spirula.engine.mesh.export import save_png
    from spirula.engine.mesh.preview import orbit_views, render

    m = trimesh.load(a.mesh, force="mesh")
    uvs = tex = colours = None
    if getattr(m.visual, "kind", None) == "vertex":  # the PLY export: colours per vertex
        colours = np.asarray(m.visual.vertex_colors)[:, :3]
    if getattr(m.visual, "kind", None) == "texture":
        mat = m.visual.material
        img = getattr(mat, "baseColorTexture", None) or getattr(mat, "image", None)
        uvs, tex = np.asarray(m.visual.uv), np.asarray(img.convert("RGB"))
    up = a.up or (0.0, 0.0, 1.0)
    if a.dataset is not None:
        from spirula.engine.ingest.load import read_scene

        scene = read_scene(a.dataset)
        up = -np.mean([v.w2c[1, :3] for v in scene.views], axis=0)
    views, focal = orbit_views(m.vertices, 4, a.elevation, up)
    a.prefix.parent.mkdir(parents=True, exist_ok=True)
    imgs = []
    for k, w2c in enumerate(views):
        img = render(m.vertices, m.faces, w2c, focal * a.size, a.size, a.size, uvs=uvs, texture=tex,
                     vertex_colors=colours)
        save_png(Path(f"{a.prefix}_{k}.png"), img)
        imgs.append(img)
    save_png(Path(f"{a.prefix}_views.png"), np.concatenate(imgs, 1))
    print(f"wrote {a.prefix}_0..3.png and {a.prefix}_views.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
