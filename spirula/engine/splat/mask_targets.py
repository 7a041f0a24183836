"""Masks in training: what the loss sees of a masked training image (spirula/engine/ingest/masks.py
finds and reads the masks; :attr:`spirula.engine.ingest.dataset.Dataset.masks` is the mode in force).

The training image goes to the GPU as packed RGBA8 (spirula/engine/splat/trainer.py pack_rgba8).

* ``ignore``: RGB as loaded, the mask's weight in the alpha byte. The loss weighs each
  pixel by it (shaders/loss/ssim.slang, MASKED: a pixel of weight 0 takes no part and gets
  no gradient) and the rasterizer skips the tiles whose every pixel has weight 0
  (shaders/raster/mask.slang). Held-out views are scored on their kept pixels too
  (:func:`kept_psnr`).
* ``cutout``: the masked-out pixels are empty space, supervised through their colour: the
  target there is the background colour the rasterizer composites behind the splats
  (TrainConfig.background), ``target = m rgb + (1 - m) background`` (for an alpha-channel
  mask the colour is already ``m rgb``, composited over black, so ``rgb + (1 - m)
  background``: the "over" operator either way), alpha 255, the ordinary loss. Why the
  colour and not an alpha loss: a render equals the background at a pixel exactly when no
  splat covers it (transmittance 1) unless splats of the background's own colour cover it,
  and that one case is what an alpha term would add; it needs dL/d(transmittance) through the
  rasterizer's backward, which takes only colour gradients today. The colour target is
  what alpha images always trained with (over the default black background), and a
  non-black background (``--background``) separates the two better: dark objects over black
  are the weak case (state it, choose a background far from the object's colours).
* ``off``: RGB as loaded, alpha 255, exactly the unmasked step.

The mesh bake leaves out masked pixels in both modes (spirula/engine/mesh/bake.py).
"""

from __future__ import annotations

import numpy as np

from ..ingest.images import quantize_u8

MODES_IN_FORCE = ("off", "ignore", "cutout")


def training_rgba(image: np.ndarray, mask: np.ndarray | None, mode: str, background=(0.0, 0.0, 0.0),
                  premultiplied: bool = False) -> np.ndarray:
    """[H, W] uint32 packed RGBA8 (r in the low byte) the loss trains ``image`` against.

    image [H, W, 3] uint8; mask [H, W] uint8 (255 keep, 0 masked out) or None (every pixel
    kept); mode "off", "ignore" or "cutout" (module docstring); background 3 floats in [0, 1]
    (cutout's target); premultiplied: the image's colour is already x mask (an alpha-channel
    mask, spirula/engine/ingest/masks.py). ValueError for another mode or a mask of another size."""
    if mode not in MODES_IN_FORCE:
        raise ValueError(f"masks mode must be one of {', '.join(MODES_IN_FORCE)}, not {mode!r}")
    h, w, _ = image.shape
    rgba = np.empty((h, w, 4), np.uint8)
    rgba[..., 3] = 255
    if mask is not None and mask.shape != (h, w):
        raise ValueError(f"mask is {mask.shape[1]}x{mask.shape[0]}, image {w}x{h}")
    if mask is None or mode == "off":
        rgba[..., :3] = image
    elif mode == "ignore":
        rgba[..., :3] = image
        rgba[..., 3] = mask
    else:
        m = mask.astype(np.float32)[..., None] / np.float32(255.0)
        rgb = image.astype(np.float32) / np.float32(255.0)
        bg = np.asarray(background, np.float32).reshape(1, 1, 3)
        rgba[..., :3] = quantize_u8((rgb if premultiplied else m * rgb) + (1.0 - m) * bg)
    return rgba.view(np.uint32)[..., 0]


def target_image(image: np.ndarray, mask: np.ndarray | None, mode: str, background=(0.0, 0.0, 0.0),
                 premultiplied: bool = False) -> np.ndarray:
    """[H, W, 3] uint8: the colours of :func:`training_rgba` (cutout's background-filled
    target; the image itself otherwise), for scoring and showing."""
    packed = training_rgba(image, mask, mode, background, premultiplied)
    return np.ascontiguousarray(packed.view(np.uint8).reshape(*packed.shape, 4)[..., :3])


def kept_psnr(render: np.ndarray, gt: np.ndarray, mask: np.ndarray | None) -> float:
    """PSNR (dB) of ``render`` against ``gt`` ([H, W, 3] float in [0, 1]) over the kept
    pixels: the squared error weighted by mask / 255 ([H, W] uint8; None = every pixel),
    divided by 3 x the weights' sum. inf for a perfect match, nan when nothing is kept."""
    err = (np.asarray(render, np.float64) - np.asarray(gt, np.float64)) ** 2
    wgt = np.ones(err.shape[:2]) if mask is None else mask.astype(np.float64) / 255.0
    total = 3.0 * wgt.sum()
    if total <= 0:
        return float("nan")
    mse = float((err * wgt[..., None]).sum() / total)
    return float("inf") if mse == 0 else float(-10.0 * np.log10(mse))


def mask_overlay(image: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """[H, W, 3] uint8 for showing a mask (the studio's review): the kept pixels as they are,
    the masked-out ones darkened to a third and tinted red, blended by the weight."""
    if mask is None:
        return image
    m = mask.astype(np.float32)[..., None] / np.float32(255.0)
    dim = image.astype(np.float32) * np.float32(1 / 3) + np.asarray([80.0, 0.0, 0.0], np.float32)
    return quantize_u8((m * image.astype(np.float32) + (1.0 - m) * dim) / np.float32(255.0))
