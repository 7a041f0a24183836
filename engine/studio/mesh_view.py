"""A textured mesh shown in the viewport: the viewer draws Gaussians, so each triangle of
the mesh becomes one flat Gaussian (a surfel) with the triangle's mean, its covariance
(the covariance of a uniform density over the triangle, widened so neighbours overlap and
flattened along the normal) and the texture's colour at the triangle's centre. What the
viewport shows is the exported file itself (the GLB as written), read back with trimesh.

Triangles beyond ``max_surfels`` are sampled by area (the large ones are what the eye
sees); the note on the scene says how many were drawn."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..io.ply import GaussianPly
from ..io.quantize import sh0_from_rgb

WIDEN = 1.6            # sigma x this, so that neighbouring surfels close the surface
THIN = 0.05            # sigma along the normal, x the smaller in-plane sigma
OPACITY = 0.98


def read_textured_mesh(path: Path):
    """(vertices [V, 3], faces [F, 3], colours [F, 3] in 0..1) of a GLB / OBJ / PLY mesh."""
    import trimesh

    try:
        mesh = trimesh.load(str(path), force="mesh", process=False)
    except Exception as exc:  # trimesh raises many kinds for a bad file
        raise SpirulaError(f"{path}: cannot read the mesh ({type(exc).__name__}: {exc})") from exc
    verts = np.asarray(mesh.vertices, np.float64)
    faces = np.asarray(mesh.faces, np.int64)
    if len(faces) == 0:
        raise SpirulaError(f"{path}: the mesh has no triangles")
    return verts, faces, face_colours(mesh, verts, faces)


def face_colours(mesh, verts: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """[F, 3] colour in 0..1 at each triangle's centre: the texture there, else the
    vertex colours' mean, else grey."""
    vis = mesh.visual
    uv = getattr(vis, "uv", None)
    material = getattr(vis, "material", None)
    image = getattr(material, "baseColorTexture", None) or getattr(material, "image", None)
    if uv is not None and image is not None and len(uv) == len(verts):
        tex = np.asarray(image.convert("RGB"), np.float64) / 255.0
        h, w = tex.shape[:2]
        c = np.asarray(uv, np.float64)[faces].mean(axis=1)
        x = np.clip(np.rint((c[:, 0] % 1.0) * (w - 1)), 0, w - 1).astype(np.int64)
        y = np.clip(np.rint((1.0 - c[:, 1] % 1.0) * (h - 1)), 0, h - 1).astype(np.int64)
        return tex[y, x]
    vc = getattr(vis, "vertex_colors", None)
    if vc is not None and len(vc) == len(verts):
        return np.asarray(vc, np.float64)[faces, :3].mean(axis=1) / 255.0
    return np.full((len(faces), 3), 0.6)


def rotation_to_quaternion(r: np.ndarray) -> np.ndarray:
    """[N, 4] (w, x, y, z) of rotation matrices [N, 3, 3] (Shepperd's branch per row)."""
    n = len(r)
    q = np.empty((n, 4))
    tr = np.trace(r, axis1=1, axis2=2)
    cases = np.stack([tr, r[:, 0, 0], r[:, 1, 1], r[:, 2, 2]], 1).argmax(1)
    for k in range(4):
        m = cases == k
        if not m.any():
            continue
        a = r[m]
        if k == 0:
            s = np.sqrt(np.maximum(tr[m] + 1.0, 1e-12)) * 2
            q[m] = np.stack([0.25 * s, (a[:, 2, 1] - a[:, 1, 2]) / s, (a[:, 0, 2] - a[:, 2, 0]) / s,
                             (a[:, 1, 0] - a[:, 0, 1]) / s], 1)
        else:
            i = k - 1
            j, l = (i + 1) % 3, (i + 2) % 3
            s = np.sqrt(np.maximum(1.0 + a[:, i, i] - a[:, j, j] - a[:, l, l], 1e-12)) * 2
            qq = np.empty((m.sum(), 4))
            qq[:, 0] = (a[:, l, j] - a[:, j, l]) / s
            qq[:, 1 + i] = 0.25 * s
            qq[:, 1 + j] = (a[:, j, i] + a[:, i, j]) / s
            qq[:, 1 + l] = (a[:, l, i] + a[:, i, l]) / s
            q[m] = qq
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def surfels_from_mesh(path: str | Path, max_surfels: int = 400_000, seed: int = 0) -> GaussianPly:
    """One flat Gaussian per triangle of the mesh at ``path`` (see the module docstring)."""
    path = Path(path)
    verts, faces, colours = read_textured_mesh(path)
    tri = verts[faces]                                      # [F, 3, 3]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    keep = np.flatnonzero(area > 0)
    if len(keep) > max_surfels:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(keep, max_surfels, replace=False, p=area[keep] / area[keep].sum()))
    tri, colours = tri[keep], colours[keep]
    mean = tri.mean(axis=1)
    d = tri - mean[:, None, :]
    cov = np.einsum("fki,fkj->fij", d, d) / 12.0             # uniform density over the triangle
    evals, evecs = np.linalg.eigh(cov)                      # ascending: [normal, minor, major]
    sig = np.sqrt(np.maximum(evals, 0.0)) * WIDEN
    sig[:, 0] = np.maximum(sig[:, 1] * THIN, 1e-9)
    sig[:, 1:] = np.maximum(sig[:, 1:], 1e-9)
    rot = evecs.copy()
    rot[np.linalg.det(rot) < 0, :, 0] *= -1                 # a proper rotation
    g = GaussianPly(
        means=mean.astype(np.float32),
        scales=np.log(sig).astype(np.float32),
        quats=rotation_to_quaternion(rot).astype(np.float32),
        opacities=np.full(len(mean), np.log(OPACITY / (1 - OPACITY)), np.float32),
        sh0=sh0_from_rgb(colours).astype(np.float32),
        shN=np.zeros((len(mean), 0, 3), np.float32),
    )
    g.notes = [f"{path}: a mesh of {len(faces):,} triangles, shown as {len(mean):,} flat splats (one per triangle"
               + (", sampled by area" if len(mean) < (area > 0).sum() else "") + ")"]
    return g
