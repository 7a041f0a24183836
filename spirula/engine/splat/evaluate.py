"""Held-out evaluation: render each test camera, PSNR and SSIM against its image, and save
the render beside its ground truth as PNG.

Protocol with per-image appearance (TrainConfig.appearance, spirula/engine/splat/appearance.py): a
held-out image was never trained on, so it has no learned colour transform; it is rendered
and scored with the identity (the raw render of the Gaussians), after the transforms' mean
is moved into the Gaussians' colours (Trainer.recentre_appearance: the model then shows the
mean training appearance; the regulariser's pull towards identity alone left it off by a
global colour shift: -2.1 dB on the office_chair video at 7k steps, BENCHMARKS.md). A
held-out frame whose exposure differs from the mean counts against the score (a phone
video's auto exposure drifts: on office_chair the gains learned per frame span 0.94-1.09,
smooth in time). Appearance modes are therefore compared on the right half of each view
after an affine colour fitted on its left half (benchmarks/quality_bench.py,
benchmarks/appearance_exposure.py). metrics.json records the mode that trained
(``appearance``).

Masks (spirula/engine/splat/mask_targets.py): with "ignore" each view also gets ``psnr_kept``, the PSNR over
its kept pixels (what the training was asked to reproduce; the masked-out ones may show
anything, e.g. the distractor the mask removed), and the result its mean; with "cutout" the
views are scored against the background-filled target the training used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from .mask_targets import kept_psnr, target_image
from .metrics import psnr, ssim


def evaluate(trainer, test_idx: list[int], out_dir: Path | None = None) -> dict:
    """{'psnr': mean dB, 'ssim': mean, 'views': [{name, psnr, ssim}]} over ``test_idx``.
    With ``out_dir``, writes ``<name>.render.png`` and ``<name>.gt.png`` (the target it was scored
    against: with cut-out masks, the image with its masked pixels filled) there."""
    trainer.recentre_appearance()
    views = []
    masks = getattr(trainer, "masks", "off")
    for i in test_idx:
        cam = trainer.dataset.cameras[i]
        img = np.clip(trainer.render(i), 0.0, 1.0)
        gt8 = cam.image
        if masks == "cutout":
            gt8 = target_image(cam.image, cam.mask, masks, trainer.cfg.background,
                               premultiplied=trainer.dataset.masks_source == "alpha")
        gt = gt8.astype(np.float32) / 255.0
        views.append({"name": cam.name, "psnr": psnr(img, gt), "ssim": ssim(img, gt)})
        if masks == "ignore":
            views[-1]["psnr_kept"] = kept_psnr(img, gt, cam.mask)
        if out_dir is not None:
            out_dir.mkdir(parents=True, exist_ok=True)
            stem = Path(cam.name).stem
            _save_png(out_dir / f"{stem}.render.png", (img * 255.0 + 0.5).astype(np.uint8))
            _save_png(out_dir / f"{stem}.gt.png", gt8)  # what the view was scored against (cutout: filled)
    if not views:
        return {"psnr": None, "ssim": None, "views": []}
    out = {"psnr": float(np.mean([v["psnr"] for v in views])),
           "ssim": float(np.mean([v["ssim"] for v in views])), "views": views}
    if masks == "ignore":
        out["psnr_kept"] = float(np.mean([v["psnr_kept"] for v in views]))
    return out


def _save_png(path: Path, rgb: np.ndarray) -> None:
    tmp = path.with_name(path.name + ".tmp")
    Image.fromarray(rgb).save(tmp, format="PNG")
    tmp.replace(path)
