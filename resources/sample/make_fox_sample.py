"""Regenerate the embedded sample ``resources/sample/fox/`` from the instant-ngp fox data.

Source: ``../shared/data/fox`` next to the repository (a byte-exact copy of
github.com/NVlabs/instant-ngp ``data/nerf/fox``; see that folder's README).

What it does:
  * every image that exists is resized with Pillow LANCZOS so its longer side is 960 px
    (fox: 1080x1920 -> 540x960) and saved as JPEG quality 92 (optimised Huffman tables,
    Pillow's default 4:2:0 chroma subsampling, no metadata);
  * ``transforms.json`` is rewritten with the pixel intrinsics scaled to the new size:
    ``fl_x, cx, w`` by ``new_w / w`` and ``fl_y, cy, h`` by ``new_h / h`` (the same
    factor, 0.5, for fox). ``camera_angle_x/y`` and the distortion ``k1 k2 p1 p2``
    (normalised coordinates) are unchanged, and so is every frame, including the 17
    whose images are missing upstream: the loader must cope with them;
  * ``LICENSE.txt`` is copied verbatim and ``ATTRIBUTION.md`` is written.

The result is built in a temporary sibling folder and then swapped in, so an interrupted
run leaves the previous sample intact. Usage::

    python resources/sample/make_fox_sample.py [--src DIR] [--dst DIR]

Output bytes depend on the Pillow/libjpeg version; pixel content and JSON do not.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_SRC = REPO.parent / "shared" / "data" / "fox"
DEFAULT_DST = HERE / "fox"

LONG_SIDE = 960
JPEG_QUALITY = 92
UPSTREAM_COMMIT = "abe236ee00cf90cfca6e36e65c00435d5b21f50a"
UPSTREAM_FOLDER_COMMIT = "3aeb1cf741fad1baa8cbc6f07b91f551cdb075ee"

ATTRIBUTION = """\
# Fox sample — attribution and license

This folder is a **derivative** of the "fox" dataset of NVIDIA's instant-ngp.

- **Source:** https://github.com/NVlabs/instant-ngp, folder `data/nerf/fox/`, at commit
  `{commit}` (the folder itself was last changed in commit
  `{folder_commit}`, "Smaller fox dataset").
- **Copyright:** NVIDIA Corporation & affiliates.
- **License:** NVIDIA Source Code License-NC, reproduced verbatim in `LICENSE.txt` in this
  folder, which must stay with the data. Use is limited to **non-commercial research and
  evaluation** purposes. Spirula Studio ships this sample only as a demo/test scene under
  those terms; it is not licensed for commercial use.
- **Modified by Spirula Studio** with `resources/sample/make_fox_sample.py`:
  - the {n_images} images that exist upstream were downscaled from {src_w}x{src_h} to
    {dst_w}x{dst_h} (longer side {long_side} px, Pillow LANCZOS) and re-encoded as JPEG,
    quality {quality};
  - in `transforms.json`, `fl_x`, `cx`, `w` were multiplied by {sx:g} and `fl_y`, `cy`, `h`
    by {sy:g}; `camera_angle_x`, `camera_angle_y`, the distortion coefficients
    `k1 k2 p1 p2` (normalised image coordinates), `aabb_scale` and all frames
    (`file_path`, `sharpness`, `transform_matrix`) are unchanged;
  - all {n_frames} frames are still listed, including the {n_missing} whose images were
    removed upstream ({missing}); readers must skip them with a warning.
"""


def scaled_size(w: int, h: int, long_side: int) -> tuple[int, int]:
    """(new_w, new_h) with the longer side equal to ``long_side``, aspect kept (rounded)."""
    s = long_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def _same_type(old, value: float):
    """Keep ints as ints and floats as floats, like the upstream file."""
    return int(round(value)) if isinstance(old, int) else float(value)


def build(src: Path, out: Path) -> dict:
    meta = json.loads((src / "transforms.json").read_text())
    w, h = int(meta["w"]), int(meta["h"])
    new_w, new_h = scaled_size(w, h, LONG_SIDE)
    sx, sy = new_w / w, new_h / h

    (out / "images").mkdir(parents=True)
    present, missing = [], []
    for frame in meta["frames"]:
        rel = frame["file_path"]
        src_img = src / rel
        if not src_img.exists():
            missing.append(Path(rel).stem)
            continue
        with Image.open(src_img) as im:
            im = im.convert("RGB")
            if im.size != (w, h):
                raise SystemExit(f"{src_img}: size {im.size} differs from transforms.json ({w}x{h})")
            small = im.resize((new_w, new_h), Image.Resampling.LANCZOS)
        small.info.clear()  # drop the encoder comment carried over from the source
        dst_img = out / rel
        dst_img.parent.mkdir(parents=True, exist_ok=True)
        small.save(dst_img, "JPEG", quality=JPEG_QUALITY, optimize=True)
        present.append(rel)

    new_meta = dict(meta)  # key order kept
    new_meta["fl_x"] = meta["fl_x"] * sx
    new_meta["cx"] = meta["cx"] * sx
    new_meta["w"] = _same_type(meta["w"], new_w)
    new_meta["fl_y"] = meta["fl_y"] * sy
    new_meta["cy"] = meta["cy"] * sy
    new_meta["h"] = _same_type(meta["h"], new_h)
    (out / "transforms.json").write_text(json.dumps(new_meta, indent=2) + "\n")

    shutil.copyfile(src / "LICENSE.txt", out / "LICENSE.txt")
    (out / "ATTRIBUTION.md").write_text(ATTRIBUTION.format(
        commit=UPSTREAM_COMMIT, folder_commit=UPSTREAM_FOLDER_COMMIT,
        n_images=len(present), src_w=w, src_h=h, dst_w=new_w, dst_h=new_h,
        long_side=LONG_SIDE, quality=JPEG_QUALITY, sx=sx, sy=sy,
        n_frames=len(meta["frames"]), n_missing=len(missing), missing=", ".join(missing),
    ))
    return {"images": len(present), "frames": len(meta["frames"]), "missing": missing,
            "size": (new_w, new_h)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=DEFAULT_SRC, help=f"default: {DEFAULT_SRC}")
    ap.add_argument("--dst", type=Path, default=DEFAULT_DST, help=f"default: {DEFAULT_DST}")
    args = ap.parse_args(argv)
    src, dst = args.src.resolve(), args.dst.resolve()
    if not (src / "transforms.json").is_file() or not (src / "LICENSE.txt").is_file():
        print(f"{src}: not the fox dataset (needs transforms.json and LICENSE.txt)", file=sys.stderr)
        return 2
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.", dir=dst.parent))
    try:
        info = build(src, tmp / "out")
        if dst.exists():
            dst.rename(tmp / "old")  # removed with tmp below
        (tmp / "out").rename(dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total = sum(p.stat().st_size for p in dst.rglob("*") if p.is_file())
    print(f"{dst}: {info['images']} images at {info['size'][0]}x{info['size'][1]}, "
          f"{info['frames']} frames ({len(info['missing'])} without image), "
          f"{total / 1e6:.2f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
