"""The independent renderer of the ground-truth scenes: one ray per sub-pixel through a
pinhole camera, the nearest exact hit among the scene's analytic solids
(:mod:`benchmarks.mesh_gt.geometry`), its solid texture, ambient + Lambert shading.
Nothing here uses the engine's rasterizer or camera code.

Camera conventions (as COLMAP and spirula/engine/): OpenCV axes (x right, y down, z forward),
``w2c`` [4, 4] float64 world-to-camera, PINHOLE intrinsics fx, fy, cx, cy in pixels with
pixel centres at +0.5 (pixel (0, 0) covers [0, 1) x [0, 1)). Ray directions have camera
z = 1, so a hit's ray parameter is its camera depth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .texture import Texture, shade


@dataclass(frozen=True)
class Camera:
    """A pinhole view: w2c [4, 4] float64 (OpenCV axes), focal lengths and principal point
    in pixels, image size."""

    w2c: np.ndarray
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    @property
    def centre(self) -> np.ndarray:
        """[3] camera centre in world coordinates."""
        r, t = self.w2c[:3, :3], self.w2c[:3, 3]
        return -r.T @ t

    def rays(self, supersample: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(origins [H*W*s*s, 3], directions [H*W*s*s, 3] world rays with camera z = 1, image
        coordinates [H*W*s*s, 2] (u, v) of each ray); the s*s sub-pixel rays of pixel
        (row, col) are at indices ((row * W + col) * s*s + k)."""
        s = supersample
        off = (np.arange(s) + 0.5) / s
        v, u, dv, du = np.meshgrid(np.arange(self.height), np.arange(self.width), off, off, indexing="ij")
        uv = np.stack([(u + du).ravel(), (v + dv).ravel()], 1)
        dc = np.stack([(uv[:, 0] - self.cx) / self.fx, (uv[:, 1] - self.cy) / self.fy, np.ones(len(uv))], 1)
        d = dc @ self.w2c[:3, :3]  # R^T dc per row
        return np.broadcast_to(self.centre, d.shape), d, uv

    def project(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(pixel coordinates [N, 2] (u, v), camera depth [N]) of world points [N, 3]."""
        pc = p @ self.w2c[:3, :3].T + self.w2c[:3, 3]
        z = pc[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = np.stack([self.fx * pc[:, 0] / z + self.cx, self.fy * pc[:, 1] / z + self.cy], 1)
        return uv, z


@dataclass(frozen=True)
class WideCamera:
    """A wide view with one ray per sub-pixel, written here from the lens formulas (not the
    engine's): ``kind`` "fisheye": equidistant (COLMAP's SIMPLE_FISHEYE / SIMPLE_RADIAL_FISHEYE
    with k = 0), the pixel (u, v) looks at angle theta = |(u - cx, v - cy)| / f from the axis,
    azimuth atan2(v - cy, u - cx); "equirect": longitude (u / W - 0.5) 2 pi from +z towards +x,
    latitude (v / H - 0.5) pi (y down). Rays are unit length, so a hit's ray parameter is its
    distance (not a camera depth). w2c [4, 4] float64, OpenCV axes."""

    w2c: np.ndarray
    kind: str
    width: int
    height: int
    f: float = 0.0
    cx: float = 0.0
    cy: float = 0.0

    @property
    def centre(self) -> np.ndarray:
        r, t = self.w2c[:3, :3], self.w2c[:3, 3]
        return -r.T @ t

    def camera_rays(self, uv: np.ndarray) -> np.ndarray:
        """[N, 3] unit camera-space directions of image points uv [N, 2]."""
        if self.kind == "equirect":
            lon = (uv[:, 0] / self.width - 0.5) * 2 * np.pi
            lat = (uv[:, 1] / self.height - 0.5) * np.pi
            return np.stack([np.cos(lat) * np.sin(lon), np.sin(lat), np.cos(lat) * np.cos(lon)], 1)
        a, b = (uv[:, 0] - self.cx) / self.f, (uv[:, 1] - self.cy) / self.f
        theta = np.hypot(a, b)
        s = np.sinc(theta / np.pi)  # sin(theta) / theta
        return np.stack([a * s, b * s, np.cos(theta)], 1)

    def rays(self, supersample: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As :meth:`Camera.rays`, with unit directions."""
        s = supersample
        off = (np.arange(s) + 0.5) / s
        v, u, dv, du = np.meshgrid(np.arange(self.height), np.arange(self.width), off, off, indexing="ij")
        uv = np.stack([(u + du).ravel(), (v + dv).ravel()], 1)
        d = self.camera_rays(uv) @ self.w2c[:3, :3]
        return np.broadcast_to(self.centre, d.shape), d, uv


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """[4, 4] w2c of a camera at ``eye`` looking at ``target`` with world ``up`` towards the
    top of the image (OpenCV axes: y down)."""
    eye, target, up = (np.asarray(x, float) for x in (eye, target, up))
    z = target - eye
    z /= np.linalg.norm(z)
    x = np.cross(z, up)
    if np.linalg.norm(x) < 1e-9:
        x = np.cross(z, [1.0, 0.0, 0.0])
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    r = np.stack([x, y, z])
    w2c = np.eye(4)
    w2c[:3, :3], w2c[:3, 3] = r, -r @ eye
    return w2c


def first_hit(shapes, o: np.ndarray, d: np.ndarray, candidates=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t [N], index of the shape hit [N] int (-1: none), unit normal [N, 3]) of the nearest
    hit of rays (o, d) among ``shapes`` (each with ``intersect``). ``candidates``: per shape
    None (test every ray) or a bool mask [N] of the rays that can hit it (a screen-space
    bound; rays outside it are not tested)."""
    best = np.full(len(d), np.inf)
    which = np.full(len(d), -1, np.int64)
    normal = np.zeros_like(d)
    for k, s in enumerate(shapes):
        m = None if candidates is None else candidates[k]
        if m is None:
            t, n = s.intersect(o, d)
            closer = t < best
            best[closer], which[closer], normal[closer] = t[closer], k, n[closer]
        else:
            idx = np.flatnonzero(m)
            if len(idx) == 0:
                continue
            t, n = s.intersect(o[idx], d[idx])
            closer = t < best[idx]
            sel = idx[closer]
            best[sel], which[sel], normal[sel] = t[closer], k, n[closer]
    return best, which, normal


def screen_bounds(shape, cam: Camera) -> tuple[np.ndarray, np.ndarray] | None:
    """(lo [2], hi [2]) image rectangle (u, v) holding the projection of ``shape``'s
    bounding box, grown by a pixel; None when a corner is not in front of the camera (or
    the shape has no finite bounds), so every ray must be tested."""
    lo, hi = shape.bounds()
    if getattr(shape, "inside", False):
        return None
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    uv, z = cam.project(corners)
    if np.any(z <= 1e-6):
        return None
    return uv.min(0) - 1.0, uv.max(0) + 1.0


def _candidates(shapes, cam: Camera, uv: np.ndarray) -> list:
    if isinstance(cam, WideCamera):  # no screen-space bound: every ray is tested
        return [None] * len(shapes)
    out = []
    for s in shapes:
        b = screen_bounds(s, cam)
        if b is None:
            out.append(None)
        else:
            lo, hi = b
            out.append((uv[:, 0] >= lo[0]) & (uv[:, 0] <= hi[0]) & (uv[:, 1] >= lo[1]) & (uv[:, 1] <= hi[1]))
    return out


def render(shapes, textures: list[Texture], cam: Camera, supersample: int = 2,
           background=(0.0, 0.0, 0.0), chunk: int = 1 << 18) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image [H, W, 3] float64 in [0, 1], depth [H, W] float64 camera z at the pixel
    centre (a WideCamera: the distance) (+inf where nothing is hit), shape index [H, W] int64 hit at the pixel centre
    (-1: none)). Colour is the mean of supersample^2 sub-pixel rays (anti-aliased edges
    and textures). Rays are tested only against the shapes whose projected bounding box
    holds them (exact: a ray outside it cannot hit the shape)."""
    o, d, uv = cam.rays(supersample)
    rgb = np.empty((len(d), 3))
    for s in range(0, len(d), chunk):
        oo, dd = o[s:s + chunk], d[s:s + chunk]
        t, which, n = first_hit(shapes, oo, dd, _candidates(shapes, cam, uv[s:s + chunk]))
        col = np.tile(np.asarray(background, float), (len(dd), 1))
        for k, tex in enumerate(textures):
            m = which == k
            if m.any():
                p = oo[m] + t[m, None] * dd[m]
                col[m] = shade(tex.albedo(p), n[m])
        rgb[s:s + chunk] = col
    image = rgb.reshape(cam.height, cam.width, supersample * supersample, 3).mean(2)
    oc, dc, uvc = cam.rays(1)
    hits = [first_hit(shapes, oc[s:s + chunk], dc[s:s + chunk], _candidates(shapes, cam, uvc[s:s + chunk]))
            for s in range(0, len(dc), chunk)]
    depth = np.concatenate([h[0] for h in hits]).reshape(cam.height, cam.width)
    which = np.concatenate([h[1] for h in hits]).reshape(cam.height, cam.width)
    return image, depth, which
