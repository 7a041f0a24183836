"""Preflight of host and device memory for a training run, before any image is decoded
or any model buffer allocated.

From the dataset's image list (image headers, read lazily by Pillow; the camera's size
where a file cannot be opened) and the run's settings, :func:`estimate` computes:

* host bytes: every image decoded as RGB8 at its training size (longer side at most
  ``--max-size``; ``spirula.engine.ingest.load`` keeps them all), plus the larger of two passing
  needs: the images in flight while decoding (per loader thread one image at its native
  size as RGB8 with its undistortion maps, 2 float32 per pixel: 11 bytes a native pixel),
  and reading the ``--init`` splat file (after the images: three copies of the packed
  rows, 3 x 4 D bytes a splat -- the file's columns, the packed rows and the upload's
  padded copy; measured 793 bytes a splat at SH degree 3 against these 708).
* device bytes: the training images as RGBA8 (the trainer uploads every one,
  ``spirula/engine/splat/trainer.py``), the per-pixel buffers of one render at the largest size
  (image, its gradient, final transmittance, last index, the SSIM partials: 68 bytes a
  pixel), and the Gaussians times the bytes each takes:
  the model's state 4 (D + 2 MW + 4) (``spirula/engine/splat/model.py``: params [D], two Adam
  moments [MW], four per-Gaussian scalars), the renderer's per-Gaussian buffers
  (projection outputs 68, depth-sort pairs 8, screen-space gradients 36), densify's
  [N, 16] float32 gather buffer (64) and MCMC's five scalars (20). The tile intersections
  come on top (bounded per pass by ``spirula/engine/splat/render.py``): so these are lower bounds.

What is certain is refused, with "needs X, have Y" and the setting to lower: the images
and the Gaussians the run surely has (the initial ones: the splats of ``--init`` when the
run starts from a splat file, counted from its header (:func:`init_splat_count`), else the
SfM points or ``--init-points``; for MCMC its exact budget, or the ``--init`` splats when
there are more: MCMC never removes any). ADC's ``--max-gaussians`` is a ceiling the
run may never reach: past memory it is a warning, with the cap that would fit.

Memory available: device: ``$SPIRULA_VRAM_LIMIT`` when set (a testing aid), else the GPU's
largest device-local heap (spirula/engine/profile/driver.py; unknown without the ``vulkan``
package: then no device check). On a software GPU (lavapipe) device buffers are host
memory, so host and device needs are checked together against the host's. Host: the
kernel's MemAvailable (``$SPIRULA_RAM_LIMIT`` overrides it, a testing aid; unknown
off Linux: then no host check).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .config import RunConfig, resolve_strategy
from .errors import DatasetError, SpirulaError

GiB = float(1 << 30)
DECODE_BYTES_PER_PIXEL = 3 + 8        # native RGB8 + its undistortion maps, per loader thread
IMAGE_BUFFER_BYTES_PER_PIXEL = 68     # image 12 + its gradient 12 + final_T 4 + last_index 4 + SSIM partials 36
RENDER_BYTES_PER_GAUSSIAN = 68 + 8 + 36   # projection outputs, depth-sort pairs, screen-space gradients
DENSIFY_BYTES_PER_GAUSSIAN = 64       # densify's [N, 16] float32 gather buffer
MCMC_BYTES_PER_GAUSSIAN = 20          # weights, flags, targets, sources, picks (uint32 each)
LOADER_THREADS = 8                    # spirula.engine.ingest.load's default (at most min(8, CPUs))
INIT_HOST_ROW_COPIES = 3              # reading --init: the file's columns, the packed rows, the padded upload


class MemoryPreflightError(SpirulaError):
    """The run needs more host or device memory than there is; said before any work."""


@dataclass
class MemoryEstimate:
    """What a run needs (bytes), from :func:`estimate`. ``sizes``: (width, height) at the
    training size per image, in the loader's order (sorted by name; a wide image's pinhole
    faces, spirula/engine/ingest/faces.py, one entry each); ``train``: the indices trained on."""

    dataset: str
    max_size: int
    sizes: list[tuple[int, int]]
    train: list[int]
    native_pixels: int                 # of the largest image as stored
    certain_gaussians: int             # the initial count, or MCMC's budget
    cap_gaussians: int                 # --max-gaussians
    bytes_per_gaussian: int
    mcmc: bool
    notes: list[str] = field(default_factory=list)
    init_file: str = ""                # --init: the splat file the run starts from (its count is certain)
    init_gaussians: int = 0            # the splats of init_file (0: none)
    row_floats: int = 0                # D, the packed row's floats at the run's SH degree

    @property
    def host_images(self) -> int:
        return sum(3 * w * h for w, h in self.sizes)

    @property
    def host_decoding(self) -> int:
        return min(LOADER_THREADS, os.cpu_count() or 1, len(self.sizes)) * DECODE_BYTES_PER_PIXEL * self.native_pixels

    @property
    def host_init(self) -> int:
        """Reading the --init splat file (module docstring)."""
        return self.init_gaussians * INIT_HOST_ROW_COPIES * 4 * self.row_floats

    @property
    def host(self) -> int:
        return self.host_images + max(self.host_decoding, self.host_init)

    @property
    def device_train_images(self) -> int:
        return sum(4 * self.sizes[i][0] * self.sizes[i][1] for i in self.train)

    @property
    def device_images(self) -> int:
        """The training images as RGBA8 and one render's per-pixel buffers at the largest size."""
        largest = max((w * h for w, h in self.sizes), default=0)
        return self.device_train_images + IMAGE_BUFFER_BYTES_PER_PIXEL * largest

    def device(self, gaussians: int | None = None) -> int:
        n = self.certain_gaussians if gaussians is None else gaussians
        return self.device_images + n * self.bytes_per_gaussian


def bytes_per_gaussian(sh_degree: int, bf16_moments: bool, mcmc: bool) -> int:
    """Device bytes one Gaussian takes while training (module docstring), D = the packed
    row's floats (spirula/engine/splat/param_layout.py), MW = D or ceil(D / 2) for bfloat16 moments."""
    d = 11 + 3 * (sh_degree + 1) ** 2
    mw = (d + 1) // 2 if bf16_moments else d
    return (4 * (d + 2 * mw + 4) + RENDER_BYTES_PER_GAUSSIAN + DENSIFY_BYTES_PER_GAUSSIAN
            + (MCMC_BYTES_PER_GAUSSIAN if mcmc else 0))


def estimate(dataset_path: str | os.PathLike, cfg: RunConfig) -> MemoryEstimate:
    """Read the dataset's image list and headers (no pixels) and estimate the run's
    memory. Raises DatasetError for a dataset that cannot be read (as loading would)."""
    from PIL import Image

    from .ingest.dataset import holdout_by_image, holdout_split
    from .ingest.faces import is_wide, split_faces
    from .ingest.images import fit_size
    from .ingest.load import read_scene

    scene = read_scene(Path(dataset_path))
    views = sorted(scene.views, key=lambda v: v.name)
    max_size = cfg.dataset.max_size
    sizes, native = [], 0
    images: list[str] = []   # per entry of sizes: its image (a wide image's faces share one)
    split: dict = {}         # wide camera -> its faces (spirula/engine/ingest/faces.py), as loading makes them
    for v in views:
        if is_wide(v.camera) and cfg.dataset.wide_lens == "faces":
            if v.camera not in split:
                try:
                    split[v.camera] = split_faces(v.camera, cfg.dataset.face_size)
                except DatasetError:
                    split[v.camera] = []   # loading skips its images, and says why
            native = max(native, v.camera.width * v.camera.height)  # the source is decoded whole
            for f in split[v.camera]:
                sizes.append(fit_size(f.camera.width, f.camera.height, max_size))
                images.append(v.name)
            continue
        w, h = v.camera.width, v.camera.height
        try:
            with Image.open(v.image_path) as im:   # the header only
                w, h = im.size
        except OSError:
            pass  # loading says what is wrong with it
        native = max(native, w * h)
        sizes.append(fit_size(w, h, max_size))
        images.append(v.name)
    if split:  # the trainer's split (Dataset.holdout): by image when there are faces
        train = holdout_by_image(images, cfg.dataset.eval_every)[0]
    else:
        train = holdout_split(len(views), cfg.dataset.eval_every)[0]
    t = cfg.train
    points = 0 if scene.points is None else len(scene.points)
    mcmc = resolve_strategy(t.strategy, points > 0, t.steps) == "mcmc"
    n_init = init_splat_count(t.init_file) if t.init_file else None   # --init: its splats, all kept
    initial = n_init if n_init is not None else (points or t.init_random_points)
    certain = max(min(t.mcmc_budget, t.max_gaussians), n_init or 0) if mcmc else initial
    return MemoryEstimate(str(dataset_path), max_size, sizes, train, native, certain, t.max_gaussians,
                          bytes_per_gaussian(t.sh_degree, t.adam_moments == "bf16", mcmc), mcmc,
                          init_file=t.init_file if n_init is not None else "", init_gaussians=n_init or 0,
                          row_floats=11 + 3 * (t.sh_degree + 1) ** 2)


def init_splat_count(path: str | os.PathLike) -> int | None:
    """The number of Gaussians a splat file (``--init``) holds, from its header alone (no
    decoding: the PLY and compressed PLY vertex count, SPZ's N (version 4's plaintext
    header, or the first 16 bytes of versions 1-3's gzip stream), SOG's meta.json count,
    .splat's size / 32). None when the file cannot tell (the training's reader then says
    what is wrong with it)."""
    import gzip
    import json
    import struct

    try:
        from .io.formats import detect

        fmt = detect(path)
        p = Path(path)
        if fmt in ("ply", "compressed-ply"):
            from .io.ply_format import open_ply, parse_header

            with open_ply(p) as f:
                _, elements = parse_header(f, str(p))
            return next((e.count for e in elements if e.name == "vertex"), None)
        if fmt == "splat":
            return p.stat().st_size // 32
        if fmt == "spz":
            with open(p, "rb") as f:
                head = f.read(16)
            if head[:2] == b"\x1f\x8b":
                with gzip.open(p, "rb") as g:
                    head = g.read(16)
            return struct.unpack_from("<I", head, 8)[0] if len(head) >= 12 else None
        if fmt == "sog":
            import zipfile

            if p.is_dir() or p.name.lower() == "meta.json":
                meta = (p / "meta.json" if p.is_dir() else p).read_text(encoding="utf-8")
            else:
                with zipfile.ZipFile(p) as z:
                    meta = z.read("meta.json").decode("utf-8")
            count = json.loads(meta).get("count")
            return int(count) if isinstance(count, int) and count >= 0 else None
    except Exception:  # noqa: BLE001 - a header that cannot be read: the reader says why, later
        return None
    return None


def parse_limit(name: str) -> int | None:
    """Bytes from the environment variable ``name`` ('64M', '2G', ...), or None if unset."""
    from .device import _parse_bytes

    return _parse_bytes(os.environ.get(name), name)


def host_available() -> tuple[int | None, str]:
    """(bytes of host memory available, where the number comes from); None if unknown."""
    limit = parse_limit("SPIRULA_RAM_LIMIT")
    if limit is not None:
        return limit, "$SPIRULA_RAM_LIMIT"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "available host memory"
    except OSError:
        pass
    return None, "unknown"


def device_available(gpu) -> tuple[int | None, str]:
    """(bytes of device memory, where the number comes from); None if unknown or if the
    device's memory is host memory (a software GPU)."""
    if gpu.vram_limit is not None:
        return gpu.vram_limit, "$SPIRULA_VRAM_LIMIT"
    if gpu.software:
        return None, "host memory"
    from .profile.driver import device_limits

    size = device_limits(gpu.device).get("device_local_bytes")
    return (int(size), f"{gpu.adapter}'s device memory") if size else (None, "unknown")


def _gib(b: float) -> str:
    """Bytes for a message: MiB below a GiB, else GiB."""
    return f"{b / GiB:.2f} GiB" if b >= GiB else f"{b / (1 << 20):.1f} MiB"


def _fitting_max_size(est: MemoryEstimate, room: float, per_pixel: float) -> int | None:
    """The largest --max-size (multiple of 10) whose images take at most ``room`` bytes,
    at ``per_pixel`` bytes a training pixel (areas scale with the square of the size)."""
    pixels = sum(w * h for w, h in est.sizes)
    if room <= 0 or not pixels:
        return None
    longest = max(max(w, h) for w, h in est.sizes)
    size = int(longest * math.sqrt(room / (pixels * per_pixel))) // 10 * 10
    return size if size >= 10 else None


def check_host(est: MemoryEstimate, software_gpu: bool = False) -> None:
    """Refuse (MemoryPreflightError) when the decoded images, and on a software GPU the
    device needs too, pass the host memory available."""
    have, where = host_available()
    if have is None:
        return
    need = est.host + (est.device() if software_gpu else 0)
    if need <= have:
        return
    n = len(est.sizes)
    w, h = max(est.sizes, key=lambda s: s[0] * s[1])
    parts = [f"{n:,} images decoded at up to {w} x {h} px: {_gib(est.host_images)}",
             f"decoding: {_gib(est.host_decoding)}" if est.host_decoding >= est.host_init else
             f"reading the {est.init_gaussians:,} splats of --init {est.init_file}: {_gib(est.host_init)}"]
    if software_gpu:
        parts += [f"the software GPU's training images and buffers: {_gib(est.device_images)}",
                  f"{est.certain_gaussians:,} Gaussians x {est.bytes_per_gaussian} bytes: "
                  f"{_gib(est.certain_gaussians * est.bytes_per_gaussian)}"]
    per_pixel = 3 + (4 * len(est.train) / n if software_gpu else 0)
    fit = _fitting_max_size(est, have - (need - est.host_images - (est.device_images if software_gpu else 0)),
                            per_pixel)
    raise MemoryPreflightError(
        f"{est.dataset}: not enough host memory: needs {_gib(need)} ({'; '.join(parts)}), have {_gib(have)} "
        f"({where}). Lower --max-size (now {est.max_size} px" + (f"; {fit} would fit" if fit else "") + ")"
        + (" or --max-gaussians" if software_gpu else "") + ", or use fewer images"
        + (", or start from a smaller --init model" if est.init_file else ""))


def check_device(est: MemoryEstimate, gpu, on_message: Callable[[str], None]) -> None:
    """Refuse (MemoryPreflightError) when the training images and the Gaussians the run
    surely has pass the device memory; warn when ADC's cap would (module docstring). On a
    software GPU, :func:`check_host` with ``software_gpu`` does the check instead."""
    have, where = device_available(gpu)
    if have is None:
        return
    need = est.device()
    w, h = max(est.sizes, key=lambda s: s[0] * s[1])
    per_g = est.bytes_per_gaussian
    if need > have:
        what = (f"the MCMC budget of {est.certain_gaussians:,}" if est.mcmc
                else f"{est.certain_gaussians:,} initial Gaussians")
        if est.init_file:  # its splats are all kept (MCMC removes none either)
            what = f"{est.certain_gaussians:,} Gaussians (the splats of --init {est.init_file})"
        buffers = est.device_images - est.device_train_images
        fit = _fitting_max_size(est, have - est.certain_gaussians * per_g - buffers,
                                4.0 * len(est.train) / len(est.sizes))
        lower = (f"--max-size (now {est.max_size} px" + (f"; {fit} would fit" if fit else "") + ")")
        if est.mcmc:
            room = (have - est.device_images) // per_g
            lower += " or --max-gaussians" + (f" ({room:,} would fit)" if room > 0 else "")
        raise MemoryPreflightError(
            f"{est.dataset}: not enough device memory: needs at least {_gib(need)} ({len(est.train):,} training "
            f"images at up to {w} x {h} px as RGBA8 and render buffers: {_gib(est.device_images)}; {what} x "
            f"{per_g} bytes: {_gib(est.certain_gaussians * per_g)}), have {_gib(have)} ({where}). Lower {lower}"
            + (", or start from a smaller --init model" if est.init_file else ", or train on fewer images"))
    if not est.mcmc and est.device(est.cap_gaussians) > have:
        room = max(0, (have - est.device_images) // per_g)
        on_message(f"warning: at its cap of {est.cap_gaussians:,} Gaussians (--max-gaussians) the model would need "
                   f"{_gib(est.device(est.cap_gaussians))} of device memory ({per_g} bytes each plus "
                   f"{_gib(est.device_images)} of images and buffers), have {_gib(have)} ({where}): the training "
                   f"stops with out-of-memory if it grows that far; --max-gaussians {room:,} would fit")


def preflight(dataset_path: str | os.PathLike, cfg: RunConfig, get_gpu: Callable[[], object],
              on_message: Callable[[str], None]):
    """Estimate, check the host, make the GPU (``get_gpu()``), check the device; returns
    the GPU. Raises DatasetError for an unreadable dataset and MemoryPreflightError, both
    before the GPU is made when the host check already fails."""
    est = estimate(dataset_path, cfg)
    check_host(est)
    gpu = get_gpu()
    if gpu.vram_limit is None and gpu.software:
        check_host(est, software_gpu=True)
    else:
        check_device(est, gpu, on_message)
    return gpu
