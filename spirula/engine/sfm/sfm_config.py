"""Settings of the structure-from-motion stage (pycolmap)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SfmConfig:
    """SfM settings. ``"auto"`` values depend on the input kind (video or photos)."""

    mapper: str = "global"            # "global" (GLOMAP in pycolmap) or "incremental"
    fallback: bool = True             # global registering < 90 % of the images: also try the other mapper
    matching: str = "auto"            # "auto" | "sequential" | "exhaustive"
    exhaustive_max_images: int = 100  # auto: photo sets up to this size are matched exhaustively
    overlap: int = 10                 # sequential: each frame is matched with the next `overlap` ones
    loop_every: int = 5               # sequential: every k-th frame is a loop keyframe (0 = no loop pairs)
    loop_max_keyframes: int = 60      # at most this many loop keyframes (spacing widened to fit)
    vocab_tree: str = ""              # a COLMAP vocabulary tree file: loop detection by retrieval instead
    camera_model: str = "auto"        # auto: OPENCV for a video (one camera), SIMPLE_RADIAL for photos
    max_image_size: int = 1600        # SIFT runs on images downscaled to this longer side
    max_features: int = 8192
    upsample: str = "auto"            # SIFT first octave -1 (upsample): "auto" (images <= 1000 px), "yes", "no"
    min_registered_fraction: float = 0.3  # fewer registered images than this fraction is an error
    seed: int = 0
    num_threads: int = -1             # -1 = all cores
    device: str = "auto"              # "auto" | "cpu" | "cuda" (SIFT and matching on the GPU when built with CUDA)
