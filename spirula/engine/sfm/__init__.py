"""Structure from motion with pycolmap: SIFT features, pair matching (sequential with
loop keyframes, or exhaustive), global or incremental mapping, undistortion to pinhole
cameras, and pose comparison with a reference model. Entry point: :func:`run_sfm`."""

from .sfm_config import SfmConfig
from .features import SfmError
from .reconstruct import run_sfm
from .colmap_undistort import undistort

__all__ = ["SfmConfig", "SfmError", "run_sfm", "undistort"]
