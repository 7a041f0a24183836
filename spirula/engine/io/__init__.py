"""Splat and mesh file formats: 3DGS PLY read/write (``spirula.engine.io.ply``), the generic PLY
parser under it (``ply_format``), the checks on read Gaussians (``splat_checks``) and the
route from a point cloud or mesh PLY to splats (``ply_points``); the compressed splat formats,
one module each (``spz``, ``sog``, ``compressed_ply``, ``dot_splat``, their shared helpers in
``quantize`` and ``splat_file``) and the registry over all of them (``formats``: detect,
read_any, write_any, estimated_bytes); ``spirula export`` (``export_command``)."""

from spirula.engine.io.ply import GaussianPly, NotGaussiansError, PlyWarning, read_ply, write_ply
from spirula.engine.io.ply_points import open_splats, splats_from_points

__all__ = ["GaussianPly", "NotGaussiansError", "PlyWarning", "open_splats", "read_ply", "splats_from_points",
           "write_ply"]
