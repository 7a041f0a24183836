"""Dataset ingest: COLMAP (binary/text) and nerfstudio/instant-ngp readers, image loading,
undistortion to cropped pinhole cameras. Entry point: :func:`load_dataset`."""

from .dataset import Camera, Dataset
from .load import load_dataset, read_scene

__all__ = ["Camera", "Dataset", "load_dataset", "read_scene"]
