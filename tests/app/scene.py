"""A tiny synthetic nerfstudio dataset for the studio tests: coloured discs at random 3D
points seen by cameras on a ring (64 x 48 px), written as transforms.json + PNGs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from spirula.engine.pose import invert_rigid, look_at

_GL = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenCV <-> OpenGL camera axes


def look_at_c2w(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """[4, 4] camera-to-world, OpenCV axes (x right, y down, z forward)."""
    return invert_rigid(look_at(eye, target, up))


def write_scene(folder: Path, views: int = 10, width: int = 64, height: int = 48, points: int = 120,
                seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(-0.6, 0.6, (points, 3))
    cols = rng.integers(40, 256, (points, 3))
    f = 0.9 * width
    frames = []
    (folder / "images").mkdir(parents=True, exist_ok=True)
    for k in range(views):
        a = 2 * np.pi * k / views
        eye = (3.0 * np.cos(a), 3.0 * np.sin(a), 0.8 + 0.3 * np.sin(3 * a))
        c2w = look_at_c2w(eye, (0.0, 0.0, 0.0))
        w2c = np.linalg.inv(c2w)
        pc = pts @ w2c[:3, :3].T + w2c[:3, 3]
        order = np.argsort(-pc[:, 2])  # far to near
        img = Image.new("RGB", (width, height), (0, 0, 0))
        draw = ImageDraw.Draw(img)
        for i in order:
            x, y, z = pc[i]
            if z <= 0.1:
                continue
            u, v = f * x / z + width / 2, f * y / z + height / 2
            r = 0.12 * f / z
            draw.ellipse([u - r, v - r, u + r, v + r], fill=tuple(int(c) for c in cols[i]))
        name = f"images/{k:03d}.png"
        img.save(folder / name)
        frames.append({"file_path": name, "transform_matrix": (c2w @ _GL).tolist()})
    meta = {"fl_x": f, "fl_y": f, "cx": width / 2, "cy": height / 2, "w": width, "h": height, "frames": frames}
    (folder / "transforms.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder
