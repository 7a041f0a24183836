"""The scene graph of a glTF file for spirula/engine/io/gltf.py: which nodes instance a mesh, each
node's global transform (``matrix``, or ``translation`` / ``rotation`` (x, y, z, w) /
``scale``, multiplied down the hierarchy from the default scene's roots), and its split
into rotation, one positive scale and translation. ValueError (turned into the reader's
one-line SplatFileError) for an index that does not exist, a cycle or shared child, non-
numbers, a rotation that is not a unit quaternion, and a transform that is not a rotation
with one positive scale (non-uniform scale, shear or a mirror cannot be carried by the
Gaussians' scales)."""

from __future__ import annotations

import json

import numpy as np

__all__ = ["need_index", "instances", "decompose", "matrix_quat", "quat_mul"]


def need_index(doc: dict, key: str, i, where: str) -> dict:
    items = doc.get(key)
    if not isinstance(i, int) or isinstance(i, bool) or not isinstance(items, list) or not 0 <= i < len(items) \
            or not isinstance(items[i], dict):
        one = {"meshes": "mesh", "accessors": "accessor", "bufferViews": "bufferView", "buffers": "buffer",
               "nodes": "node", "scenes": "scene"}.get(key, key)
        raise ValueError(f"{where} refers to {one} {json.dumps(i)[:40]}, which does not exist")
    return items[i]


def _numbers(v, where: str) -> np.ndarray:
    try:
        a = np.asarray(v, np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where} is {json.dumps(v)[:60]}, not numbers") from None
    return a


def _node_matrix(node: dict, where: str) -> np.ndarray:
    if "matrix" in node:
        m = _numbers(node["matrix"], f"{where}'s matrix")
        if m.shape != (16,) or not np.all(np.isfinite(m)):
            raise ValueError(f"{where}'s matrix is not 16 finite numbers")
        return m.reshape(4, 4).T                              # glTF matrices are column-major
    t = _numbers(node.get("translation", [0, 0, 0]), f"{where}'s translation")
    r = _numbers(node.get("rotation", [0, 0, 0, 1]), f"{where}'s rotation")     # x, y, z, w
    s = _numbers(node.get("scale", [1, 1, 1]), f"{where}'s scale")
    if t.shape != (3,) or r.shape != (4,) or s.shape != (3,) or not all(np.all(np.isfinite(a)) for a in (t, r, s)):
        raise ValueError(f"{where}'s translation / rotation / scale are not 3 / 4 / 3 finite numbers")
    if abs(np.linalg.norm(r) - 1.0) > 1e-3:
        raise ValueError(f"{where}'s rotation is not a unit quaternion (length {np.linalg.norm(r):.6g})")
    m = np.eye(4)
    m[:3, :3] = _quat_matrix(np.array([r[3], r[0], r[1], r[2]])) * s[None, :]
    m[:3, 3] = t
    return m


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def matrix_quat(r: np.ndarray) -> np.ndarray:
    """w, x, y, z of a rotation matrix (Shepperd's method)."""
    t = np.trace(r)
    i = int(np.argmax([t, r[0, 0], r[1, 1], r[2, 2]]))
    if i == 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = [0.25 * s, (r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s]
    else:
        a, b, c = {1: (0, 1, 2), 2: (1, 2, 0), 3: (2, 0, 1)}[i]
        s = 2.0 * np.sqrt(1.0 + r[a, a] - r[b, b] - r[c, c])
        q = np.zeros(4)
        q[0] = (r[c, b] - r[b, c]) / s
        q[1 + a] = 0.25 * s
        q[1 + b] = (r[a, b] + r[b, a]) / s
        q[1 + c] = (r[a, c] + r[c, a]) / s
    return np.asarray(q, np.float64)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of [4] (w, x, y, z) ``a`` with [N, 4] ``b``."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b.T
    return np.stack([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2], axis=1)


def instances(doc: dict) -> list[tuple[int, np.ndarray, str]]:
    """(mesh index, global 4x4 matrix, node name) of each node with a mesh in the default
    scene (``scene``, else scene 0, else every node that is no other's child)."""
    nodes = doc.get("nodes") or []
    if not isinstance(nodes, list):
        raise ValueError("'nodes' is not a list")
    scenes = doc.get("scenes")
    if isinstance(scenes, list) and scenes:
        scene = need_index(doc, "scenes", doc.get("scene", 0), "the document's scene")
        roots = scene.get("nodes", [])
    else:
        children = {c for nd in nodes if isinstance(nd, dict) for c in _index_list(nd.get("children", []), "children")}
        roots = [i for i in range(len(nodes)) if i not in children]
    roots = _index_list(roots, "the scene's nodes")
    out, stack, seen = [], [(r, np.eye(4)) for r in roots], set()
    while stack:
        i, parent = stack.pop()
        node = need_index(doc, "nodes", i, "a scene")
        if i in seen:
            raise ValueError(f"node {i} appears twice in the scene's hierarchy (a cycle or a shared child)")
        seen.add(i)
        m = parent @ _node_matrix(node, f"node {i}")
        if "mesh" in node:
            out.append((node["mesh"], m, f"node {i}"))
        stack.extend((c, m) for c in _index_list(node.get("children", []), f"node {i}'s children"))
    return sorted(out, key=lambda t: t[2])


def _index_list(v, where: str) -> list[int]:
    """``v`` when it is a list of whole numbers, else ValueError."""
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
        raise ValueError(f"{where} is {json.dumps(v)[:60]}, not a list of indices")
    return v


def decompose(m: np.ndarray, where: str) -> tuple[np.ndarray, float, np.ndarray]:
    """(rotation 3x3, uniform scale, translation) of a node's global matrix; ValueError
    unless it is translation, rotation and one positive scale."""
    a = m[:3, :3]
    cols = np.linalg.norm(a, axis=0)
    if not np.allclose(m[3], [0, 0, 0, 1]) or not np.all(cols > 0) or not np.all(np.isfinite(cols)):
        raise ValueError(f"{where}'s transform is not decomposable (glTF: finite positive column lengths)")
    s = float(cols.mean())
    r = a / s
    if np.max(np.abs(cols - s)) > 1e-5 * s or np.max(np.abs(r.T @ r - np.eye(3))) > 1e-5 or np.linalg.det(r) < 0:
        raise ValueError(f"{where}'s transform is not a rotation with one positive scale (non-uniform scale, "
                         "shear or a mirror cannot be carried by 3D Gaussians' scales)")
    return r, s, m[:3, 3]
