"""Score a mesh against a scene's ground-truth surface (benchmarks/mesh_gt/scenes.py).

Distances are between point samples: the mesh is sampled by area (seeded) at spacing
tau(0.5%) / 3 near the scored region, the ground truth is its grid of spacing
tau(0.5%) / 4, and nearest neighbours come from scipy's cKDTree. Sampling adds a small
bias: a surface equal to the ground truth scores F = 1, an accuracy of about 0.1 and a
completeness of about 0.17 of tau(0.5%) (tests/benchmarks/test_mesh_gt.py).

tau: 0.5% and 1% of the object box's diagonal (room: of the room's box).

* accuracy: mean distance from the mesh's samples to the ground truth, its faces in
  contact included (object scenes: samples inside the object box grown by tau(1%),
  against the object and its support, so a flat cap on the floor under the object is
  accurate); completeness: mean distance from the ground truth's object points that a
  mesh must cover (room: every such point; visible and seen by >= 2 views, see
  GroundTruth) to the mesh; Chamfer: their mean.
* precision / recall / F-score at each tau: the share of mesh samples within tau of the
  ground truth (object scenes: samples inside the object box grown by that tau) and of
  ground-truth points within tau of the mesh; F their harmonic mean.
* outside_area_pct: the share of the mesh's area outside the object box grown by 1% of
  its diagonal (estimated from OUTSIDE_SAMPLES area-uniform samples; its standard error
  is below 0.05 percentage points at 2%).
* components (connected by shared edges, after merging equal vertices), watertight
  (every edge shared by exactly two faces, trimesh's test), the largest component's share
  of the area.
* thin parts: for each part flagged thin, the recall at tau(1%) of its ground-truth
  points against the largest component alone (and against the whole mesh); a part is
  ``in_largest`` when that recall is at least THIN_COVER.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh
from scipy.spatial import cKDTree

from .scenes import GroundTruth

OUTSIDE_SAMPLES = 400_000
THIN_COVER = 0.5
MAX_SAMPLES = 3_000_000


def load_mesh(path: str | Path) -> trimesh.Trimesh:
    """The mesh at ``path`` (PLY, GLB, OBJ: whatever trimesh reads; a scene's meshes are
    concatenated) with equal vertices merged (texture seams do not split it). ValueError
    naming the file when it holds no triangles."""
    path = Path(path)
    mesh = trimesh.load(path, force="mesh", process=False)
    if not isinstance(mesh, trimesh.Trimesh):
        raise ValueError(f"{path}: no triangle mesh in it")
    mesh.merge_vertices(merge_tex=True, merge_norm=True)
    return mesh


def sample_faces(vertices: np.ndarray, faces: np.ndarray, count: int, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(points [count, 3], face index [count]): area-uniform samples of the triangles."""
    tri = vertices[faces]
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    if count == 0 or area.sum() <= 0:
        return np.zeros((0, 3)), np.zeros(0, np.int64)
    f = rng.choice(len(faces), count, p=area / area.sum())
    r1, r2 = rng.random(count), rng.random(count)
    s = np.sqrt(r1)
    b = np.stack([1 - s, s * (1 - r2), s * r2], 1)
    return (b[:, :, None] * tri[f]).sum(1), f


def _inside(p: np.ndarray, lo: np.ndarray, hi: np.ndarray, grow: float) -> np.ndarray:
    return np.all((p >= lo - grow) & (p <= hi + grow), axis=1)


def _prf(d_pred: np.ndarray, d_gt: np.ndarray, tau: float) -> tuple[float, float, float]:
    p = float((d_pred < tau).mean()) if len(d_pred) else 0.0
    r = float((d_gt < tau).mean()) if len(d_gt) else 0.0
    return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def score_mesh(mesh: trimesh.Trimesh, gt: GroundTruth, seed: int = 0) -> dict:
    """The metrics of the module docstring for ``mesh`` against ``gt`` (distances in metres,
    shares in percent; a mean over nothing is None). Deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    v = np.asarray(mesh.vertices, np.float64)
    f = np.asarray(mesh.faces, np.int64)
    diag = gt.diagonal
    tau = {"0.5%": 0.005 * diag, "1%": 0.01 * diag}
    lo, hi = gt.object_lo, gt.object_hi
    obj = gt.kind == "object"
    out: dict = {"faces": int(len(f)), "vertices": int(len(v)), "diagonal": diag, "tau": tau}
    area = mesh.area_faces if len(f) else np.zeros(0)
    out["area"] = float(area.sum())

    # outside area (estimated by area-uniform samples of the whole mesh)
    p_all, _ = sample_faces(v, f, OUTSIDE_SAMPLES if len(f) else 0, rng)
    out["outside_area_pct"] = float(100 * (~_inside(p_all, lo, hi, tau["1%"])).mean()) if len(p_all) else 0.0

    # components and watertightness
    if len(f):
        labels = trimesh.graph.connected_component_labels(mesh.face_adjacency, node_count=len(f))
        comp_area = np.bincount(labels, weights=area)
        largest = int(np.argmax(comp_area))
        out["components"] = int(labels.max() + 1)
        out["largest_area_pct"] = float(100 * comp_area[largest] / max(comp_area.sum(), 1e-300))
        out["watertight"] = bool(mesh.is_watertight)
    else:
        labels, largest = np.zeros(0, np.int64), -1
        out.update(components=0, largest_area_pct=0.0, watertight=False)

    # dense samples of the faces that can reach the scored region
    gt_all = gt.points
    gt_comp = gt.points[gt.mask("object") if obj else gt.mask()]
    spacing = tau["0.5%"] / 3
    if len(f):
        tri = v[f]
        if obj:
            near = np.all((tri.max(1) >= lo - 2 * tau["1%"]) & (tri.min(1) <= hi + 2 * tau["1%"]), axis=1)
        else:
            near = np.ones(len(f), bool)
        sel = np.flatnonzero(near)
        count = int(np.clip(area[sel].sum() / spacing ** 2, 20_000, MAX_SAMPLES)) if len(sel) else 0
        q, qf = sample_faces(v, f[sel], count, rng)
        qf = sel[qf]
    else:
        q, qf = np.zeros((0, 3)), np.zeros(0, np.int64)
    out["samples"] = int(len(q))

    # mesh -> ground truth
    d_pred = cKDTree(gt_all).query(q)[0] if len(q) else np.zeros(0)
    in_acc = _inside(q, lo, hi, tau["1%"]) if obj else np.ones(len(q), bool)
    # ground truth -> mesh
    tree = cKDTree(q) if len(q) else None
    d_gt = tree.query(gt_comp)[0] if tree is not None else np.full(len(gt_comp), np.inf)
    acc = d_pred[in_acc].mean() if in_acc.any() else np.inf
    comp = d_gt.mean()
    out["accuracy"], out["completeness"] = _finite(acc), _finite(comp)
    out["chamfer"] = _finite(0.5 * (acc + comp))
    out["chamfer_pct"] = _finite(100 * 0.5 * (acc + comp) / diag)
    for name, t in tau.items():
        keep = _inside(q, lo, hi, t) if obj else np.ones(len(q), bool)
        p, r, fs = _prf(d_pred[keep], d_gt, t)
        out[f"precision@{name}"], out[f"recall@{name}"], out[f"fscore@{name}"] = p, r, fs

    # thin parts against the largest component
    thin = {}
    in_big = labels[qf] == largest if len(q) else np.zeros(0, bool)
    big_tree = cKDTree(q[in_big]) if in_big.any() else None
    for part in gt.parts:
        if not part["thin"]:
            continue
        pts = gt.points[gt.mask(part=part["name"])]
        if not len(pts):
            continue
        r_all = float((tree.query(pts)[0] < tau["1%"]).mean()) if tree is not None else 0.0
        r_big = float((big_tree.query(pts)[0] < tau["1%"]).mean()) if big_tree is not None else 0.0
        thin[part["name"]] = {"recall_largest": r_big, "recall": r_all, "in_largest": r_big >= THIN_COVER}
    out["thin_parts"] = thin
    out["thin_in_largest"] = all(t["in_largest"] for t in thin.values()) if thin else None
    return out


def score_file(path: str | Path, gt: GroundTruth, seed: int = 0) -> dict:
    """:func:`score_mesh` of the mesh file at ``path`` (see :func:`load_mesh`)."""
    return score_mesh(load_mesh(path), gt, seed)
