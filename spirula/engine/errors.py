"""Errors the engine raises for the user: each names the file (or device) and the problem."""

# why `--device cpu` / SPIRULA_DEVICE=cpu is refused (spirula/engine/device.py, the command lines)
CPU_REFUSAL = ("the cpu backend is not supported: the training and rendering kernels use GPU subgroup (wave) "
               "operations that slangpy's CPU target cannot compile. On a machine without a GPU use vulkan with "
               "Mesa's software Vulkan (lavapipe, Mesa 25 or newer)")


class SpirulaError(Exception):
    """Base class of errors that are shown to the user as a one-line message."""


class DatasetError(SpirulaError):
    """A dataset (COLMAP model, transforms.json, image) cannot be read or is inconsistent."""


class DeviceError(SpirulaError):
    """No GPU device could be created, or a kernel failed to compile."""


class PlyError(SpirulaError):
    """A PLY file is malformed or does not hold 3D Gaussians."""


class DeviceMemoryError(DeviceError):
    """A device buffer could not be allocated (out of VRAM, or over the buffer size limit)."""


class IntersectionLimitError(SpirulaError):
    """A render needs more tile intersections in one tile row than one rasterizer pass may
    bin (spirula/engine/splat/render.py, ``max_intersections_per_pass``)."""


class TrainingError(SpirulaError):
    """Training cannot go on (non-finite values, out of device memory); the last good
    checkpoint is kept."""


class NonFiniteError(TrainingError, FloatingPointError):
    """NaN or Inf in the loss, the gradients or the parameters."""


class OutputError(SpirulaError):
    """An output folder cannot be created or written (checked before any work starts)."""


class WriteError(OutputError, OSError):
    """The operating system refused a write (no space left, read-only file system, no
    permission, quota): one line naming what was written and where, e.g. ``cannot write
    checkpoint /p/checkpoints/train.npz: no space left on device``. Also an OSError (``errno``,
    ``strerror``, ``filename`` as the original's), so code that tolerates a failed write
    (a checkpoint on a full disk is a warning) still catches it."""

    def __init__(self, path, what: str, err: OSError):
        OSError.__init__(self, err.errno, err.strerror, str(path))
        reason = (err.strerror or str(err) or type(err).__name__)
        reason = reason[:1].lower() + reason[1:]
        self.what = what
        self.message = f"cannot write {what + ' ' if what else ''}{path}: {reason}"

    def __str__(self) -> str:
        return self.message


class SplatFileError(SpirulaError):
    """A splat file (PLY, compressed PLY, SPZ, SOG, .splat) cannot be read or written: the
    message names the file, the format and what is wrong (truncated, bad magic, wrong count,
    unknown version, non-finite values ...). ``path`` and ``format`` hold the first two."""

    def __init__(self, path, fmt: str, what: str):
        super().__init__(f"{path}: {fmt} file: {what}")
        self.path, self.format, self.what = str(path), fmt, what
