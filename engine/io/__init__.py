"""Splat and mesh file formats: 3DGS PLY read/write (``engine.io.ply``)."""

from engine.io.ply import GaussianPly, PlyWarning, read_ply, write_ply

__all__ = ["GaussianPly", "PlyWarning", "read_ply", "write_ply"]
