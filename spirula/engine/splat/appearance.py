"""Per-image appearance: exposure and white balance learned per training image, so that
they are not baked into the Gaussians' colours (phone video changes both between frames).

The rendered image I [H, W, 3] of training image i becomes I' = T_i(I) before the
photometric loss; the loss's gradient dL/dI' goes back through T_i to the rasterizer's
backward, and T_i's own parameters take one Adam step, all in the training step's command
buffer (shaders/appearance/appearance.slang, where the forward and backward math is
written out). Modes (TrainConfig.appearance):

* ``"exposure"``: T_i(I) = diag(g_i) I, a gain per channel (3 parameters per image):
  exposure and white balance, what a phone's camera changes between frames (a gain in
  linear light stays a gain after the sRGB curve). ``spirula run``'s default on a video.
  With regulariser ``reg`` (||g_i - 1||^2) pulling towards identity.
* ``"affine"``: T_i(I) = A_i I + b_i per pixel, A_i 3x3, b_i 3 (12 parameters per image),
  with the regulariser ``reg`` (||A_i - I||^2 + ||b_i||^2) pulling towards identity.
* ``"bilagrid"``: a bilateral grid per image (Wang et al. 2024, "Bilateral Guided Radiance
  Field Processing", sec. 4): 16 x 16 x 8 cells over (x, y, luma) of 3x4 affine matrices,
  identity at the start, sliced trilinearly at each pixel by (x / W, y / H, BT.601 luma of
  the rendered colour); the gradient flows through the luma guide as well. Regulariser: the
  grid's total variation times ``tv_weight`` (10, as the paper and gsplat's default).

Parameters of all images live in one buffer [num_images, cells, 12] (cells = 1 for
exposure and affine: exposure trains only A's diagonal, the others stay 0),
indexed by the dataset's camera index (held-out images are never trained and stay
identity), stored as the deviation from identity D = [A | b] - [I | 0], row-major. Each
image has its own Adam moments, advanced when that image is trained on (a lazy, per-image
Adam; bias correction from the host's count of the image's steps, which, as the model's,
also counts a step skipped on the GPU after an intersection overflow).

Learning rates and weights (:class:`AppearanceSettings`):

* affine ``lr`` 5e-3: an image is trained on once per pass over the training set, i.e.
  steps / images times (a 200-frame video at 7,000 steps: 35 times); Adam moves a
  parameter by at most about ``lr`` per visit, so 5e-3 can follow a 30% exposure change
  within ~60 visits, while the jitter near the optimum (a fraction of ``lr``) stays below
  0.5% of the intensity.
* affine ``reg`` 0.01: the loss's gradient on a gain of an image 30% too dark is ~0.1
  (L1 part 0.8 / 3 per unit of mean |residual| sign, times the colours ~0.5); the
  regulariser's 2 reg D = 0.006 at D = 0.3 barely resists a real change, yet it is the only
  force on the direction the loss cannot see (all images darker, the Gaussians brighter),
  and keeps the transforms' common part at identity, which held-out views use.
* exposure: affine's ``lr`` and ``reg``, Adam's ``eps`` 0.03 (1e-15 elsewhere). Adam
  normalises the gradient, so with eps 1e-15 a gain moves by about ``lr`` per visit
  whatever its gradient's size; with 0.03 a gradient well below 0.03 moves it by lr g / 0.03
  (a fraction of lr), a real exposure jump's (~0.1) by ~0.75 lr. The frames of a phone
  video drift in exposure: on office_chair the gains learned with 1e-15 span 0.94-1.09,
  smooth along the frames (lag-1 correlation 0.97); the model shows their mean, so each
  held-out frame's own drift counts against it under the identity protocol. Eps 0.03
  takes up less of that drift (spread 2.4% instead of 3.7%). Measured (software Vulkan,
  office_chair's reference frames at 128 px, 2,500 steps, seeds 0-1,
  benchmarks/results/appearance-2026-12-06-lavapipe.jsonl): as shot, held-out identity
  PSNR off 29.83, exposure with eps 1e-15 28.94, with 0.03 29.62 (right halves after a
  left-half fit: 29.85, 29.87, 29.80; held-out frames with their neighbours' mean gain:
  30.28 and 30.22 against off's 29.88, seed 1); half the training images 30% darker: off
  20.55, exposure with eps 0.03 21.69 (right halves: 26.81 and 27.92).
* bilagrid ``lr`` 2e-3 and ``tv_weight`` 10: the peer's (gsplat 1.5.3 simple_trainer)
  values. Its TV term is averaged over all images every step; here image i's grid gets its
  TV gradient when i is trained on, once per pass, which sums to the same per pass.
* ``form`` (affine only): which entries of [A | b] train (FORMS: all 12; the three
  per-channel gains; gains and offsets; one gain); ``reg_bias`` weights the offsets' pull;
  ``lr_final`` > 0 decays the lr exponentially from ``start`` to ``end`` (the run's steps).
* ``start``: the transforms stay identity (and nothing is recorded) for the first steps,
  while the Gaussians' colours settle from the initialisation; otherwise every transform
  first absorbs the initial colours' overall error, a common part the regulariser then
  removes only slowly.

Held-out views have no trained appearance: they are rendered and scored with the identity
(spirula/engine/splat/evaluate.py); comparisons of appearance modes use the right half of each
held-out view after an affine colour fitted on its left half (benchmarks/
appearance_exposure.py, quality_bench.py), which does not charge a held-out frame's own
exposure to the model. :meth:`Appearance.save` writes the learned transforms beside
the PLY (``appearance.json``, plus ``appearance.npy`` for the grid) for later stages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..device import Gpu
from ..fileio import open_atomic, write_json_atomic
from ..ingest.images import quantize_u8
from ..profile import IMAGE
from .buffers import BufferSet
from .schedule import APPEARANCE_START, appearance_window

BILAGRID_SHAPE = (16, 16, 8)  # cells along x, y, luma (Wang et al. 2024; gsplat's default)
_TILE = 16                    # pixel tile of the forward / backward kernels (T in appearance.slang)


@dataclass
class AppearanceSettings:
    lr: float
    reg: float = 0.0           # L2 towards identity: reg * ||D||^2 per trained step of an image
    tv_weight: float = 0.0     # total variation of the grid (bilagrid)
    start: int = 0             # steps before the transforms train (identity and no dispatch until then)
    form: str = "affine"       # which entries of [A | b] train (FORMS); the grid trains all
    lr_final: float = 0.0      # > 0: lr decays exponentially from start to lr_final at step end
    end: int = 0               # the run's last step (the lr decay's end)
    reg_bias: float = 1.0      # the offsets' pull is reg * reg_bias
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-15


# entries k = 4 r + c of [A | b] that train (bit k), and whether the diagonal is one gain
FORMS = {"affine": (0xFFF, False),          # 3x3 A and b: 12 per image
         "gains": (0x421, False),           # A diagonal (per-channel gain: exposure and white balance), b = 0
         "gains_bias": (0x421 | 0x888, False),  # per-channel gain and offset
         "gain": (0x421, True)}             # one gain for the three channels (exposure only)

START_STEPS = APPEARANCE_START  # the transforms start training here, or at a fifth of a shorter run


CELL_MODES = ("exposure", "affine")  # one affine cell per image (exposure trains its diagonal only)


def default_settings(mode: str, steps: int | None = None) -> AppearanceSettings:
    """The settings of ``mode`` ("exposure", "affine" or "bilagrid") for a run of ``steps``;
    the module docstring says why. ``start`` is START_STEPS, or a fifth of a shorter run (which would
    otherwise end with every transform at identity)."""
    start, end = appearance_window(steps)  # spirula/engine/splat/schedule.py: the run's step numbers, in one place
    if mode == "exposure":
        return AppearanceSettings(lr=5e-3, reg=0.01, start=start, end=end, form="gains", eps=0.03)
    if mode == "affine":
        return AppearanceSettings(lr=5e-3, reg=0.01, start=start, end=end)
    if mode == "bilagrid":
        return AppearanceSettings(lr=2e-3, tv_weight=10.0, start=start, end=end)
    raise ValueError(f"no appearance settings for mode {mode!r}")


class Appearance:
    """The per-image transforms of one training run and their optimizer (module docstring).

    ``mode``: "exposure", "affine" or "bilagrid"; ``num_images``: the dataset's camera count.
    Buffers (float32): params, exp_avg, exp_avg_sq [num_images, cells, 12]; accum [cells, 12]
    (the current step's gradient, zero between steps). ``steps`` [num_images] int64: Adam
    steps taken per image (host).
    """

    def __init__(self, gpu: Gpu, mode: str, num_images: int, settings: AppearanceSettings | None = None):
        if num_images < 1:
            raise ValueError("appearance needs at least one image")
        self.gpu, self.mode, self.num_images = gpu, mode, int(num_images)
        self.shape = (1, 1, 1) if mode in CELL_MODES else BILAGRID_SHAPE if mode == "bilagrid" else None
        if self.shape is None:
            raise ValueError(f"appearance mode must be 'exposure', 'affine' or 'bilagrid', not {mode!r}")
        self.settings = settings or default_settings(mode)
        if self.settings.form not in FORMS:
            raise ValueError(f"appearance form must be one of {', '.join(FORMS)}, not {self.settings.form!r}")
        gx, gy, gz = self.shape
        self.cells = gx * gy * gz
        self.per_image = 12 * self.cells
        consts = dict(GX=gx, GY=gy, GZ=gz)
        k = lambda entry: gpu.kernel("appearance/appearance", entry, **consts)
        self.k_fwd, self.k_bwd, self.k_adam = k("appearance_forward"), k("appearance_backward"), k("appearance_adam")
        self.k_tv = k("appearance_tv") if mode == "bilagrid" else None
        nbytes = 4 * self.num_images * self.per_image
        self.buf = {name: gpu.zeros(nbytes, f"appearance.{name}") for name in ("params", "exp_avg", "exp_avg_sq")}
        self.buf["accum"] = gpu.zeros(4 * self.per_image, "appearance.accum")
        self.steps = np.zeros(self.num_images, np.int64)
        self.scratch = BufferSet(gpu, "appearance", category=IMAGE)

    def active(self, step: int) -> bool:
        """Whether the transforms apply and train at training step ``step`` (from 0)."""
        return step >= self.settings.start

    # --- the training step ------------------------------------------------------------------
    def record_forward(self, enc, image, index: int, width: int, height: int):
        """Record I' = T_index(I) (1 dispatch); returns the float32 buffer [H, W, 3] holding
        I' (scratch, reused by the next call). ``image``: the render [H, W, 3] float32."""
        w, h = int(width), int(height)
        out = self.scratch.get("image", 12 * w * h)
        self.k_fwd.record(enc, self._tiles(w, h), render=image, params=self.buf["params"], out_image=out,
                          image_index=self._index(index), width=w, height=h)
        return out

    def record_backward(self, enc, image, grad, index: int, width: int, height: int, flags, step: int,
                        overflow_guard) -> None:
        """Record the backward and the Adam step of image ``index`` (3 dispatches; 4 with
        the grid's TV). ``grad`` [H, W, 3] float32 holds dL/dI' and is overwritten with
        dL/dI (the rasterizer's image gradient); ``image`` is the render I. ``flags``: the
        NaN/Inf guard's block (words 1..3, shaders/optim/adam_math.slang) with the training
        ``step``; ``overflow_guard``: (count buffer, capacity) of Rasterizer.overflow_guard:
        a skipped step changes nothing but still clears the accumulated gradient."""
        w, h, i, s = int(width), int(height), self._index(index), self.settings
        accum = self.buf["accum"]
        self.k_bwd.record(enc, self._tiles(w, h), render=image, params=self.buf["params"], grad=grad, accum=accum,
                          image_index=i, width=w, height=h)
        total, capacity = overflow_guard
        threads = [self.per_image, 1, 1]
        if self.k_tv is not None:
            self.k_tv.record(enc, threads, params=self.buf["params"], accum=accum, isect_total=total,
                             isect_capacity=int(capacity), image_index=i, tv_weight=float(s.tv_weight))
        self.steps[i] += 1
        t = int(self.steps[i])
        mask, tie = FORMS[s.form] if self.cells == 1 else FORMS["affine"]
        lr = s.lr
        if s.lr_final > 0.0 and s.end > s.start:
            lr = s.lr * (s.lr_final / s.lr) ** min(max((step - s.start) / (s.end - s.start), 0.0), 1.0)
        self.k_adam.record(enc, threads, params=self.buf["params"], exp_avg=self.buf["exp_avg"],
                           exp_avg_sq=self.buf["exp_avg_sq"], accum=accum, flags=flags, isect_total=total,
                           isect_capacity=int(capacity), image_index=i, lr=float(lr), reg=float(s.reg),
                           beta1=float(s.beta1), beta2=float(s.beta2), eps=float(s.eps),
                           bias1=1.0 - s.beta1 ** t, bias2=1.0 - s.beta2 ** t, step=int(step) & 0xFFFFFFFF,
                           free_mask=mask, tie_diag=int(tie), reg_bias=float(s.reg_bias))

    def _index(self, index: int) -> int:
        if not 0 <= int(index) < self.num_images:
            raise IndexError(f"image {index} outside the {self.num_images} appearance slots")
        return int(index)

    @staticmethod
    def _tiles(w: int, h: int) -> list[int]:
        return [-(-w // _TILE) * _TILE, -(-h // _TILE) * _TILE, 1]

    # --- host views, checkpoints, files -----------------------------------------------------
    def deviations(self) -> np.ndarray:
        """D = M - [I | 0] of every image and cell: [num_images, GZ, GY, GX, 3, 4] float32
        (waits for the GPU)."""
        gx, gy, gz = self.shape
        return self.gpu.read(self.buf["params"], np.float32, shape=(self.num_images, gz, gy, gx, 3, 4))

    def matrices(self) -> np.ndarray:
        """The transforms M = [A | b], out = A x + b: [num_images, GZ, GY, GX, 3, 4] float64
        (waits for the GPU)."""
        m = self.deviations().astype(np.float64)
        m[..., :3] += np.eye(3)
        return m

    def recentre(self, trained: list[int]) -> np.ndarray | None:
        """Move the transforms' common part into the model: M = [A | b], the mean of the
        trained images' transforms (over images, and over cells for the grid), becomes the
        identity here (T_i -> T_i o M^-1: A_i A^-1, b_i - A_i A^-1 b) and is returned, for
        :meth:`GaussianModel.transform_colours` to apply to the Gaussians' colours (images
        never stepped count as trained on nothing and are left alone). Then
        T_i(model) is unchanged for every training image (exactly for affine; for the grid
        up to the luma guide, which sees the transformed colour), while the model alone,
        what held-out views and exported files show, has the mean training appearance
        instead of whatever the weak pull towards identity left. None (nothing changed)
        when nothing was trained, the mean is the identity already, or A is near singular
        (condition > 1e3). Waits for the GPU."""
        idx = sorted(i for i in set(int(i) for i in trained) if self.steps[i] > 0)  # visited: not identity
        if not idx:
            return None
        m = self.matrices()
        mean = m[idx].reshape(-1, 3, 4).mean(axis=0)
        a, b = mean[:, :3], mean[:, 3]
        if not np.isfinite(mean).all() or np.linalg.cond(a) > 1e3:
            return None
        if np.abs(mean - np.c_[np.eye(3), np.zeros(3)]).max() < 1e-6:
            return None  # centred already (e.g. recentred for an earlier evaluation): nothing to move
        a_inv = np.linalg.inv(a)
        out = m.copy()
        out[idx, ..., :3] = m[idx, ..., :3] @ a_inv
        out[idx, ..., 3] = m[idx, ..., 3] - np.einsum("...ij,j->...i", out[idx, ..., :3], b)
        out[..., :3] -= np.eye(3)
        self.gpu.wait_idle()
        self.gpu.write(self.buf["params"], np.ascontiguousarray(out.reshape(self.num_images, -1), np.float32))
        return mean

    def state_dict(self) -> dict:
        """params, exp_avg, exp_avg_sq [num_images, cells * 12] float32, steps [num_images]
        int64 and the mode (waits for the GPU; nothing may be in flight)."""
        shape = (self.num_images, self.per_image)
        out = {name: self.gpu.read(self.buf[name], np.float32, shape=shape)
               for name in ("params", "exp_avg", "exp_avg_sq")}
        out["steps"] = self.steps.copy()
        out["mode"] = self.mode
        return out

    def load_state_dict(self, state: dict) -> bool:
        """Load :meth:`state_dict`; returns False (and keeps the identity start) when it is
        of another mode or image count."""
        shape = (self.num_images, self.per_image)
        if state.get("mode") != self.mode or any(np.shape(state.get(n)) != shape
                                                 for n in ("params", "exp_avg", "exp_avg_sq")):
            return False
        self.gpu.wait_idle()
        for name in ("params", "exp_avg", "exp_avg_sq"):
            self.gpu.write(self.buf[name], np.ascontiguousarray(state[name], np.float32))
        self.steps = np.asarray(state["steps"], np.int64).reshape(self.num_images).copy()
        return True

    def save(self, folder: Path, names: list[str], trained: list[int]) -> list[Path]:
        """Write the transforms beside the PLY for later stages: ``appearance.json``
        ({mode, convention, grid, images: [{name, trained, matrix}]}; exposure and affine:
        each image's 3x4 matrix inline) and, for the grid, ``appearance.npy`` (float32 [num_images, GZ,
        GY, GX, 3, 4], image order of ``images``). ``names``: the dataset's image names by
        camera index; ``trained``: the camera indices trained on (the others are identity).
        Returns the paths written (atomically)."""
        folder = Path(folder)
        m = self.matrices()
        done = set(int(i) for i in trained)
        images = [{"name": n, "trained": i in done} for i, n in enumerate(names)]
        meta = {"mode": self.mode, "convention": "out = A x + b per pixel, x the rendered linear RGB in [0, 1]; "
                "matrix = [A | b] (3 rows of 4)", "grid": None, "images": images}
        written = []
        if self.cells == 1:
            for entry, mat in zip(images, m[:, 0, 0, 0]):
                entry["matrix"] = mat.round(7).tolist()
        else:
            gx, gy, gz = self.shape
            meta["grid"] = {"cells_x": gx, "cells_y": gy, "cells_luma": gz, "file": "appearance.npy",
                            "layout": "[image, luma, y, x, 3, 4]; cell centres at u = i / (cells - 1) of "
                                      "x / W, y / H (pixel centres) and BT.601 luma clamped to [0, 1]; "
                                      "trilinear between cells"}
            with open_atomic(folder / "appearance.npy", "wb") as f:
                np.save(f, m.astype(np.float32))
            written.append(folder / "appearance.npy")
        write_json_atomic(folder / "appearance.json", meta)
        return [folder / "appearance.json"] + written


def read_appearance(folder: Path) -> dict:
    """Read :meth:`Appearance.save`'s files: {mode, images: [{name, trained}], matrices:
    float64 [num_images, GZ, GY, GX, 3, 4]}."""
    folder = Path(folder)
    meta = json.loads((folder / "appearance.json").read_text(encoding="utf-8"))
    if meta.get("grid") is None:  # one matrix per image (exposure, affine)
        mats = np.array([e["matrix"] for e in meta["images"]], np.float64).reshape(-1, 1, 1, 1, 3, 4)
    else:
        mats = np.load(folder / meta["grid"]["file"]).astype(np.float64)
    return {"mode": meta["mode"], "images": meta["images"], "matrices": mats}


def remove_appearance(image: np.ndarray, matrices: np.ndarray, stride: int = 4, passes: int = 3) -> np.ndarray:
    """Undo one image's learned transform: the colours the model would have to render for
    this photo, so that stages reading the photos (the mesh texture bake) see one exposure
    and white balance instead of the capture's changing ones.

    image: [H, W, 3] uint8, the photo y; matrices: float [GZ, GY, GX, 3, 4], the image's
    M = [A | b] as :func:`read_appearance` gives them (GZ = GY = GX = 1 for affine). Returns
    [H, W, 3] uint8 x with y = A(x) x + b(x), clipped to [0, 1] before quantising.

    Affine: x = A^-1 (y - b), exact. Grid: the matrix at a pixel depends on the luma of x
    itself (the guide of Wang et al. 2024 is the rendered colour), so the inverse is a fixed
    point: the guide starts from the photo's luma and is refreshed from x ``passes`` - 1
    times. The grid's x/y interpolation is evaluated at the centre of each ``stride`` px
    block (a cell spans W / (GX - 1) px, ~60 px at 1000 px and 16 cells, so the matrix moves
    by < 1/15 cell inside a block); the luma interpolation is per pixel."""
    h, w, _ = image.shape
    y = image.reshape(-1, 3).astype(np.float64) / 255.0
    mats = np.asarray(matrices, np.float64)
    gz, gy, gx = mats.shape[:3]
    if gz * gy * gx == 1:
        a, b = mats[0, 0, 0, :, :3], mats[0, 0, 0, :, 3]
        x = np.linalg.solve(a, (y - b).T).T
        return quantize_u8(x.reshape(h, w, 3))
    s = max(int(stride), 1)
    ch, cw = -(-h // s), -(-w // s)
    wy = _hat_weights((np.arange(ch) * s + min(s, h) / 2.0) / h, gy)  # [ch, GY]
    wx = _hat_weights((np.arange(cw) * s + min(s, w) / 2.0) / w, gx)  # [cw, GX]
    layers = np.einsum("hy,zyxrc,wx->zhwrc", wy, mats, wx, optimize=True).reshape(gz, ch * cw, 12).astype(np.float32)
    block = ((np.arange(h) // s)[:, None] * cw + (np.arange(w) // s)[None, :]).reshape(-1)
    luma = np.array([0.299, 0.587, 0.114])
    y = y.astype(np.float32)
    x = y
    for _ in range(max(int(passes), 1)):
        gzf = np.clip(x @ luma, 0.0, 1.0) * (gz - 1)
        z0 = np.minimum(gzf.astype(np.int64), gz - 2)
        fz = (gzf - z0)[:, None]
        m = ((1.0 - fz) * layers[z0, block] + fz * layers[z0 + 1, block]).reshape(-1, 3, 4)
        x = _solve3(m[:, :, :3], y - m[:, :, 3])
    return quantize_u8(x.reshape(h, w, 3))


def _solve3(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """x with a x = r for [N, 3, 3] a and [N, 3] r, by the adjugate (rows a0 a1 a2: the
    inverse's columns are a1 x a2, a2 x a0, a0 x a1 over the determinant): 0.09 s for
    750k float32 systems here against 0.13 s for NumPy's batched solve, and it does not
    raise on a singular pixel (its determinant is floored at 1e-8)."""
    c0, c1, c2 = np.cross(a[:, 1], a[:, 2]), np.cross(a[:, 2], a[:, 0]), np.cross(a[:, 0], a[:, 1])
    det = np.einsum("nk,nk->n", a[:, 0], c0)
    det = np.where(np.abs(det) > 1e-8, det, 1e-8)
    return (r[:, 0:1] * c0 + r[:, 1:2] * c1 + r[:, 2:3] * c2) / det[:, None]


def _hat_weights(t: np.ndarray, cells: int) -> np.ndarray:
    """[len(t), cells] linear interpolation weights of corner-aligned cells at t in [0, 1]
    (cell i at t = i / (cells - 1); one cell: all weight on it)."""
    if cells == 1:
        return np.ones((len(t), 1))
    g = np.clip(t, 0.0, 1.0) * (cells - 1)
    return np.maximum(0.0, 1.0 - np.abs(g[:, None] - np.arange(cells)[None, :]))
