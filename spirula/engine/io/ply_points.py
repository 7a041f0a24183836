"""The route for a point cloud or a mesh PLY opened as splats: convert its vertices.

:func:`read_ply` refuses a PLY without Gaussian properties (:class:`NotGaussiansError`).
:func:`open_splats` is what the studio (and any command opening a PLY for viewing) calls
instead: 3DGS PLYs are read as usual, point clouds and meshes are converted by
:func:`splats_from_points` with a note saying so, anything else is refused as before.

Conversion, per vertex (faces of a mesh are ignored; it is shown as its vertices):

- isotropic Gaussian, sigma = mean distance to the 3 nearest other vertices (the 3DGS
  initialisation from SfM points, Kerbl et al. 2023, sec. 5.1), floored at a tenth of the
  median of those distances so duplicate points do not get a zero (log -inf) scale; a
  single vertex gets sigma 1 (world units);
- identity rotation, opacity :data:`POINT_OPACITY`;
- colour from ``red green blue`` (or ``r g b`` / ``diffuse_*``) as the SH DC term
  ``(rgb / 255 - 0.5) / C0`` (C0 = 0.28209479177387814, the degree-0 SH basis constant),
  mid grey without colours; SH degree 0.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from scipy.spatial import cKDTree

from .ply import GaussianPly, NotGaussiansError, PlyWarning, read_ply, read_point_cloud
from .ply_format import open_ply, parse_header

__all__ = ["POINT_OPACITY", "open_splats", "splats_from_points"]

POINT_OPACITY = 0.5
SH_C0 = 0.28209479177387814   # Y_0^0 = 1 / (2 sqrt(pi)): the DC coefficient of RGB, sh0 = (rgb - 0.5) / SH_C0
_NEIGHBOURS = 3


def _neighbour_sigma(xyz: np.ndarray) -> np.ndarray:
    """[N] float64: mean distance to the 3 nearest other points, floored (see module doc)."""
    n = len(xyz)
    if n < 2:
        return np.ones(n)
    k = min(_NEIGHBOURS + 1, n)
    dist, _ = cKDTree(xyz).query(xyz, k=k)
    d = dist[:, 1:].mean(axis=1)
    positive = d[d > 0]
    floor = 0.1 * float(np.median(positive)) if positive.size else 1.0
    return np.maximum(d, floor)


def splats_from_points(path: str | os.PathLike, *, warn: bool = True) -> GaussianPly:
    """Isotropic splats [N] from the vertices of a point-cloud or mesh PLY (see the module
    docstring for the sizes, opacity and colours). ``result.notes`` holds one line naming
    the file and what was done; it is also issued as a :class:`PlyWarning` unless ``warn``
    is False.

    Raises PlyError naming the file if it has no vertex x, y, z or cannot be read.
    """
    where = str(path)
    with open_ply(path) as f:
        _, elements = parse_header(f, where)
    faces = next((e.count for e in elements if e.name == "face"), None)
    xyz, rgb = read_point_cloud(path)
    xyz64 = xyz.astype(np.float64)
    n = len(xyz)
    log_sigma = np.log(_neighbour_sigma(xyz64)).astype(np.float32)
    colour = rgb.astype(np.float64) / 255.0 if rgb is not None else np.full((n, 3), 0.5)
    g = GaussianPly(
        means=xyz,
        scales=np.repeat(log_sigma[:, None], 3, axis=1),
        quats=np.tile(np.float32([1, 0, 0, 0]), (n, 1)),
        opacities=np.full(n, np.log(POINT_OPACITY / (1 - POINT_OPACITY)), np.float32),
        sh0=((colour - 0.5) / SH_C0).astype(np.float32),
        shN=np.zeros((n, 0, 3), np.float32),
    )
    what = (f"a mesh ({n:,} vertices; its {faces:,} faces are ignored)" if faces is not None
            else f"a point cloud ({n:,} points)")
    g.notes = [f"{where}: {what}, not 3D Gaussians: shown as {n:,} round splats of sigma = the mean distance "
               f"to the {_NEIGHBOURS} nearest points, opacity {POINT_OPACITY:g}, "
               + ("the file's colours" if rgb is not None else "grey (the file has no colours)")]
    if warn:
        warnings.warn(g.notes[0], PlyWarning, stacklevel=2)
    return g


def open_splats(path: str | os.PathLike, *, warn: bool = True) -> GaussianPly:
    """Gaussians to view from any PLY: :func:`read_ply` for a 3DGS PLY, otherwise
    :func:`splats_from_points` for a point cloud or a mesh. The repairs and the
    conversion are in ``result.notes`` (and PlyWarnings unless ``warn`` is False).

    Raises PlyError naming the file and the problem for anything else.
    """
    try:
        return read_ply(path, warn=warn)
    except NotGaussiansError:
        return splats_from_points(path, warn=warn)
