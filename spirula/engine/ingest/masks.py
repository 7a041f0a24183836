"""Per-image masks: which pixels of a training image show the scene to learn.

Where a mask comes from (one source per dataset):

* **a masks folder** beside the images folder: ``masks/`` next to ``images/`` (a downscaled
  ``images_2/`` looks in ``masks_2/`` first, as nerfstudio writes them, then in ``masks/``),
  the mask of ``images/<dir>/<name>.<ext>`` being ``masks/<dir>/<name>.<ext>.png`` (COLMAP's
  convention) or ``masks/<dir>/<name>.png`` (nerfstudio's: the same name as a PNG), tried in
  that order. Grey (colour masks: the mean of their channels) >= 128 keeps a pixel (white =
  keep), anything darker masks it out: a mask file is a decision per pixel, so it is made
  binary when read (a JPEG-compressed mask's near-black noise stays out).
* **a mask file listed per image** (nerfstudio's ``mask_path``, :attr:`ViewSpec.mask_path
  <spirula.engine.ingest.scene.ViewSpec>`): that file, read as a masks folder's file; images
  the dataset lists none for look in the masks folder as above. A listed file that is
  missing falls under the rule below like a folder's.
* else **the images' alpha channel** (RGBA, LA, a palette or grey/RGB image with a
  transparency key, premultiplied RGBa/La): alpha is coverage, kept as it is (a weight in
  [0, 1]); the colour stays composited over black as :mod:`spirula.engine.ingest.images` reads it.

The mask goes through the same steps as its image (EXIF orientation when the image's is
applied, undistortion, crop, downscale: :mod:`spirula.engine.ingest.load`), so edges come out as
fractional weights. Stored in :attr:`spirula.engine.ingest.dataset.Camera.mask`: [H, W] uint8,
255 = keep, 0 = masked out, None = every pixel kept.

**One rule for a mask that cannot be used**: with a masks folder, an image whose mask is
missing, cannot be decoded, or whose size differs from the image's stored size is used
unmasked (every pixel kept), and one warning per kind names those images and their mask
files (a size mismatch gives both sizes). Rescaling a mask of another size is not guessed:
a mask drawn on another crop or resolution would mask the wrong pixels.

Modes (the ``masks`` setting, spirula/engine/settings.py; :data:`MASK_MODES`):

* ``ignore``: masked-out pixels take no part in the loss (weight 0; tiles all of whose
  pixels are masked out are not rasterised) and give the mesh texture no colour;
* ``cutout``: masked-out pixels are empty space: their target is the background colour
  (spirula/engine/splat/mask_targets.py says why that and not an alpha loss); the mesh bake ignores them too;
* ``off``: masks are not read (alpha composited over black, as always);
* ``auto`` (the default): ``ignore`` for a masks folder -- COLMAP and nerfstudio both mean
  "leave these pixels out" by it (a tripod, a person, the operator), and cut-out would
  instead teach empty space where the scene continues behind the removed thing -- and
  ``cutout`` for an alpha channel, which marks an object cut from its background (NeRF
  synthetic renders); that is what alpha already did before masks existed (composited over
  the default black background), so such datasets train as before. Nothing found: ``off``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from PIL import Image

from ..settings import MASK_MODES
from .scene import name_list

KEEP_THRESHOLD = 128  # a mask file's grey at or above this keeps the pixel
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")


def mask_folders(image_path: Path, name: str) -> list[tuple[Path, str]]:
    """(masks folder, image path relative to it) candidates of the image ``name`` (relative
    to its images folder) at ``image_path``: for each folder holding the image, up to the
    images folder itself, its sibling ``masks*`` folder (``images_2`` -> ``masks_2``, then
    ``masks``), nearest first; only folders that exist."""
    parts = Path(name).parts
    out = []
    for k in range(len(parts)):
        folder = image_path.parents[k]
        rel = Path(*image_path.parts[len(image_path.parts) - k - 1:]).as_posix()
        names = ([folder.name.replace("images", "masks")] if "images" in folder.name else []) + ["masks"]
        for n in dict.fromkeys(names):
            m = folder.parent / n
            if m != folder and m.is_dir():
                out.append((m, rel))
    return out


def mask_candidates(folder: Path, rel: str) -> list[Path]:
    """The mask files of image ``rel`` in masks ``folder``, in the order tried: ``<rel>.png``
    (COLMAP), ``<rel without extension>.png`` (nerfstudio)."""
    p = Path(rel)
    return list(dict.fromkeys([folder / (rel + ".png"), folder / p.with_suffix(".png")]))


def read_mask_file(path: Path) -> np.ndarray:
    """[H, W] uint8 of a mask file: 255 where its grey is >= KEEP_THRESHOLD (of 255; 16-bit
    files scaled), else 0. OSError / ValueError when it cannot be decoded."""
    with Image.open(path) as im:
        im.load()
        if im.mode.startswith("I") or im.mode == "F":
            from .images import to_rgb_float
            grey = to_rgb_float(im)[..., 0] * 255.0
        elif im.mode in ("L", "1"):
            grey = np.asarray(im.convert("L"), np.float32)
        else:
            grey = np.asarray(im.convert("RGB"), np.float32).mean(axis=2)
    return np.where(grey >= KEEP_THRESHOLD - 1e-3, 255, 0).astype(np.uint8)


def has_alpha(path: Path) -> bool:
    """Whether an image file carries an alpha channel or a transparency key (header only)."""
    try:
        with Image.open(path) as im:
            return im.mode in _ALPHA_MODES or "transparency" in im.info
    except (OSError, ValueError, Image.DecompressionBombError):
        return False


def read_alpha(path: Path) -> np.ndarray | None:
    """[H, W] uint8 alpha of an image as stored (None without one). OSError / ValueError
    when it cannot be decoded. Images without one are not decoded (header only)."""
    with Image.open(path) as im:
        if not (im.mode in _ALPHA_MODES or "transparency" in im.info):
            return None
        im.load()
        if im.mode in ("RGBa", "La"):
            return np.ascontiguousarray(np.asarray(im)[..., -1])
        if im.mode in _ALPHA_MODES or "transparency" in im.info:
            return np.ascontiguousarray(np.asarray(im.convert("RGBA"))[..., 3])
    return None


class MaskReader:
    """Finds and reads the masks of one dataset's views (thread-safe), collecting what could
    not be used for :meth:`warnings` (module docstring: the rule).

    ``mode``: one of MASK_MODES. After construction :attr:`source` is "folder", "alpha" or
    "" (mode "off", or nothing to look for) and :attr:`mode` is resolved except for "auto"
    over alpha, which becomes "cutout" or "off" once the views are read (:meth:`resolved`).
    """

    def __init__(self, mode: str, views: list) -> None:
        if mode not in MASK_MODES:
            raise ValueError(f"masks must be one of {', '.join(MASK_MODES)}, not {mode!r}")
        self.mode = mode
        self._lock = threading.Lock()
        self.missing: list[str] = []
        self.mismatch: list[tuple[str, str, tuple, tuple]] = []   # (image, mask, mask wxh, image wxh)
        self.bad: list[tuple[str, str]] = []
        self.missing_listed: list[tuple[str, str]] = []   # (image, its listed mask file that does not exist)
        self.alpha_seen = 0
        self.folders: set[Path] = set()
        self.source = ""
        self.listed = 0   # views whose dataset lists their mask file (mask_path)
        self.unused: set[Path] = set()   # mode "off": the masks folders there are, not read
        if mode == "off":
            for parent in {Path(v.image_path).parent: v for v in views}.values():  # one look per folder
                found = mask_folders(Path(parent.image_path), parent.name)
                if found:
                    self.unused.add(found[0][0])
        if mode != "off":
            for v in views:
                if getattr(v, "mask_path", None) is not None:
                    self.listed += 1
                    continue
                found = mask_folders(Path(v.image_path), v.name)
                if found:
                    self.folders.add(found[0][0])
            self.source = "folder" if self.folders or self.listed else "alpha"
        if self.source == "folder" and mode == "auto":
            self.mode = "ignore"

    def read(self, view, stored_hw: tuple[int, int]) -> np.ndarray | None:
        """[H, W] uint8 mask of ``view`` for its image as stored (``stored_hw``), or None
        (every pixel kept; a folder mask that cannot be used is recorded for the warnings)."""
        if self.source == "alpha":
            try:
                a = read_alpha(Path(view.image_path))
            except (OSError, ValueError):
                return None  # the image itself fails to decode; the image loader reports it
            if a is not None and a.shape == tuple(stored_hw):
                with self._lock:
                    self.alpha_seen += 1
                return a
            return None
        if self.source != "folder":
            return None
        listed = getattr(view, "mask_path", None)
        cands = [Path(listed)] if listed is not None else \
            [c for f, rel in mask_folders(Path(view.image_path), view.name) for c in mask_candidates(f, rel)]
        path = next((c for c in cands if c.is_file()), None)
        if path is None:
            with self._lock:
                if listed is not None:
                    self.missing_listed.append((view.name, str(listed)))
                else:
                    self.missing.append(view.name)
            return None
        try:
            m = read_mask_file(path)
        except (OSError, ValueError, Image.DecompressionBombError) as e:
            with self._lock:
                self.bad.append((view.name, f"{path} ({e})"))
            return None
        if m.shape != tuple(stored_hw):
            with self._lock:
                self.mismatch.append((view.name, str(path), (m.shape[1], m.shape[0]), (stored_hw[1], stored_hw[0])))
            return None
        return m

    def resolved(self) -> str:
        """The mode in force once every view was read: "ignore", "cutout" or "off"."""
        if self.mode == "off" or self.source == "":
            return "off"
        if self.source == "alpha" and self.alpha_seen == 0:
            return "off"
        if self.mode == "auto":  # alpha
            return "cutout"
        return self.mode

    def warnings(self) -> list[str]:
        """One line per kind of mask that could not be used, naming the images (module
        docstring: those images are used unmasked), and one when masks were asked for and
        none was found."""
        out = []
        where = ", ".join(sorted(str(f) for f in self.folders))
        if self.missing:
            looked = (f"in {where} (looked for <name>.png and <name without extension>.png)" if where else
                      "(the dataset lists no mask_path for it and there is no masks folder)")
            out.append(f"{len(self.missing)} image{'s have' if len(self.missing) > 1 else ' has'} no mask {looked}; "
                       f"used unmasked, every pixel kept: {name_list(self.missing)}")
        if self.missing_listed:
            n = len(self.missing_listed)
            name, mpath = min(self.missing_listed)
            out.append(f"{n} mask file{'s' if n > 1 else ''} listed by the dataset (mask_path) do{'es' if n == 1 else ''} "
                       f"not exist (e.g. {mpath} for {name}); used unmasked, every pixel kept: "
                       f"{name_list([v for v, _ in self.missing_listed])}")
        if self.mismatch:
            _, mpath, (mw, mh), (iw, ih) = min(self.mismatch)
            out.append(f"{len(self.mismatch)} mask{'s differ' if len(self.mismatch) > 1 else ' differs'} in size "
                       f"from {'their images' if len(self.mismatch) > 1 else 'its image'} (e.g. {mpath} is {mw}x{mh}, "
                       f"its image {iw}x{ih}); those images used unmasked, every pixel kept: "
                       f"{name_list([n for n, *_ in self.mismatch])}")
        if self.bad:
            out.append(f"{len(self.bad)} mask{'s' if len(self.bad) > 1 else ''} cannot be decoded; those images used "
                       f"unmasked, every pixel kept: " + "; ".join(f"{n}: {why}" for n, why in sorted(self.bad)[:5])
                       + (f" ... and {len(self.bad) - 5} more" if len(self.bad) > 5 else ""))
        if self.mode in ("ignore", "cutout") and self.resolved() == "off":
            out.append(f"--masks {self.mode}: no masks folder beside the images and no image with an alpha channel; "
                       "training without masks")
        return out

    def summary(self, used: int, total: int) -> str | None:
        """One line saying which masks are in force (None when masks are off, unless
        ``--masks off`` leaves a masks folder unread: then one line saying so)."""
        mode = self.resolved()
        if mode == "off":
            return (f"masks in {', '.join(sorted(str(f) for f in self.unused))} not used (--masks off)"
                    if self.unused else None)
        froms = (["the mask files the dataset lists (mask_path)"] if self.listed else []) + \
            ([f"the masks in {', '.join(sorted(str(f) for f in self.folders))}"] if self.folders else [])
        src = " and ".join(froms) if self.source == "folder" else "the images' alpha channel"
        return f"masks: {used} of {total} images masked from {src}, used as {mode}"
