#!/usr/bin/env bash
# Build .gpu-pipe/ (ignored), everything benchmarks/h200_pipeline.sh needs on the lent H200
# that the machine cannot download: run on the CPU machine from the repo root,
#     bash benchmarks/h200_pipeline_prepare.sh            (about 5 minutes: xz of pycolmap)
#
#   .gpu-pipe/slangpy.tar.xz, debs/   from .gpu/ (../shared/tools/gpu-bundle.sh), slangpy's
#                         tests/ and data/ dropped (1.6 MB)
#   .gpu-pipe/wheels/     small cp312 / pure wheels pip-installed there (trimesh, xatlas, ...)
#   .gpu-pipe/pylibs/     pycolmap and scikit-image for cp312, shrunk (tests, data, stubs
#                         dropped, .so stripped) and repacked as .tar.xz, unpacked there
#   .gpu-pipe/data/chair/images/        the 121 office_chair reference frames, unchanged
#   .gpu-pipe/data/chair_ref_poses.npz  reference camera poses by name (pose accuracy there)
#   .gpu-pipe/data/mouse_images/        ../shared/data/mouse/images downscaled to 1000 px (the
#                                       training size; PINHOLE cameras: the loader rescales
#                                       the intrinsics), JPEG q95
#   .gpu-pipe/data/models.tar.xz        mouse/sparse/0 (as is) and chair_ref/sparse/0 (the
#                                       reference model as text without 2D points and tracks:
#                                       fallback dataset if SfM fails there)
#   .gpu-pipe/COMMIT                    HEAD (and +uncommitted) when prepared
#     bash benchmarks/h200_pipeline_prepare.sh --size    only prints the carried size (and
#                                                        refreshes COMMIT): run it just before the call
# Python 3.11 from .venv does the data work (pycolmap, our loader's resize).
set -euo pipefail
cd "$(dirname "$0")/.."
P=.gpu-pipe
DATA=${SPIRULA_SHARED_DATA:-../shared/data}
PY=${PY:-.venv/bin/python}
MOUSE_SIZE=${MOUSE_SIZE:-1000}
mkdir -p $P/debs $P/wheels $P/pylibs $P/data
grep -qx '/.gpu-pipe/' .gitignore || echo '/.gpu-pipe/' >> .gitignore

carried_size() {  # what the device call carries: the working tree (tracked + untracked, not ignored) and .gpu-pipe
  local tree pipe
  tree=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 stat -c %s 2>/dev/null | awk '{s+=$1} END {print s}')
  pipe=$(find $P -type f -printf '%s\n' | awk '{s+=$1} END {print s}')
  awk -v t="$tree" -v p="$pipe" 'BEGIN {printf "carried: working tree %.2f MB + .gpu-pipe %.2f MB = %.2f MiB (limit 64 MiB)\n", t/1e6, p/1e6, (t+p)/2^20}'
}
write_commit() {  # the device copy has no .git: h200_pipeline.sh reads the commit from here
  local commit
  commit=$(git rev-parse --short HEAD)
  [ -n "$(git status --porcelain spirula benchmarks scripts 2>/dev/null)" ] && commit="$commit+uncommitted"
  echo "$commit" > $P/COMMIT
}
if [ "${1:-}" = "--size" ]; then write_commit; carried_size; exit 0; fi

# ---- slangpy (from .gpu, which is not touched; its tests/ and data/ -- fonts and test
#      images -- dropped: 1.6 MB) + the Vulkan loader debs
if [ ! -s .gpu/slangpy.tar.xz ]; then echo "no .gpu/slangpy.tar.xz: run ../shared/tools/gpu-bundle.sh first" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -s $P/slangpy.tar.xz ] || ! cmp -s .gpu/slangpy.version $P/slangpy.version; then
  mkdir "$tmp/spy" && tar -xJf .gpu/slangpy.tar.xz -C "$tmp/spy"
  rm -rf "$tmp/spy/slangpy/tests" "$tmp/spy/slangpy/data"
  tar -C "$tmp/spy" -cf - . | xz -9e -T0 > $P/slangpy.tar.xz
  cp .gpu/slangpy.version $P/
fi
cp -u .gpu/debs/*.deb $P/debs/

# ---- wheels for the H200's Python 3.12 (exactly what spirula/engine/mesh, spirula/engine/sfm, the CLI import)
plat="--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_28_x86_64"
dl() { python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp $plat --no-deps -d "$1" "${@:2}"; }
dl $P/wheels trimesh==5.2.0 xatlas==0.0.11 fast_simplification==0.2.0 tqdm==4.70.1 lazy-loader==0.6
if [ ! -s $P/pylibs/skimage.tar.xz ]; then
  dl "$tmp" scikit-image==0.26.0
  mkdir "$tmp/ski" && (cd "$tmp/ski" && python3 -m zipfile -e "$tmp"/scikit_image-*.whl .)
  find "$tmp/ski" -type d -name tests -prune -exec rm -rf {} +
  find "$tmp/ski/skimage/data" -type f ! -name '*.py' ! -name '*.pyi' ! -name '*.txt' -delete
  find "$tmp/ski" -name '*.so' -exec strip --strip-unneeded {} +
  tar -C "$tmp/ski" -cf - . | xz -9e -T0 > $P/pylibs/skimage.tar.xz
fi
if [ ! -s $P/pylibs/pycolmap.tar.xz ]; then
  dl "$tmp" pycolmap==4.2.1
  mkdir "$tmp/pcm" && (cd "$tmp/pcm" && python3 -m zipfile -e "$tmp"/pycolmap-*.whl .)
  find "$tmp/pcm" -name '*.pyi' -delete
  rm -f "$tmp/pcm/pycolmap/panorama_test.py"
  find "$tmp/pcm" -name '*.so*' -type f -exec strip --strip-unneeded {} +
  # x86 BCJ filter + 192 MiB dictionary: 20.8 MB instead of 21.4 (the wheel is 38 MB)
  tar -C "$tmp/pcm" -cf - pycolmap pycolmap.libs pycolmap-4.2.1.dist-info | xz --x86 --lzma2=preset=9e,dict=192MiB -T1 > $P/pylibs/pycolmap.tar.xz
fi

# ---- data
mkdir -p $P/data/chair/images
cp -u "$DATA"/office_chair/reference/images/*.jpg $P/data/chair/images/
rm -rf "$tmp/models" && mkdir -p "$tmp/models"
$PY - "$DATA" "$P/data" "$MOUSE_SIZE" "$tmp/models" <<'PY'
import shutil, sys
from pathlib import Path
import numpy as np
from PIL import Image
sys.path.insert(0, ".")
from spirula.engine.ingest.images import fit_size, read_image, resize
from spirula.engine.sfm.align import poses_by_name
import pycolmap

data, out, size, models = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
ref = data / "office_chair" / "reference" / "sparse" / "0"
poses = poses_by_name(ref)
names = sorted(poses)
np.savez_compressed(out / "chair_ref_poses.npz", names=np.array(names),
                    R=np.stack([poses[n][0] for n in names]), c=np.stack([poses[n][1] for n in names]))
# fallback dataset: the reference model as text, no 2D points / tracks (the loader needs poses + xyz/rgb)
rec = pycolmap.Reconstruction(str(ref))
d = models / "chair_ref" / "sparse" / "0"
d.mkdir(parents=True, exist_ok=True)
with open(d / "cameras.txt", "w") as f:
    for cid, c in rec.cameras.items():
        f.write(f"{cid} {c.model.name} {c.width} {c.height} {' '.join(repr(float(p)) for p in c.params)}\n")
with open(d / "images.txt", "w") as f:
    for iid, im in sorted(rec.images.items()):
        if not im.has_pose:
            continue
        p = im.cam_from_world()
        x, y, z, w = (float(v) for v in p.rotation.quat)   # pycolmap: xyzw
        t = [float(v) for v in p.translation]
        f.write(f"{iid} {w!r} {x!r} {y!r} {z!r} {t[0]!r} {t[1]!r} {t[2]!r} {im.camera_id} {im.name}\n\n")
with open(d / "points3D.txt", "w") as f:
    for pid, pt in rec.points3D.items():
        x, y, z = (float(v) for v in pt.xyz)
        r, g, b = (int(v) for v in pt.color)
        f.write(f"{pid} {x:.6f} {y:.6f} {z:.6f} {r} {g} {b} {float(pt.error):.4f}\n")
# mouse: images downscaled to the training size, model unchanged
src = data / "mouse"
shutil.copytree(src / "sparse", models / "mouse" / "sparse")
(out / "mouse_images").mkdir(parents=True, exist_ok=True)
for p in sorted((src / "images").iterdir()):
    q = out / "mouse_images" / p.name
    if q.exists():
        continue
    img = read_image(p)
    w, h = fit_size(img.shape[1], img.shape[0], size)
    Image.fromarray(resize(img, w, h)).save(q, quality=95)
print(f"chair poses: {len(names)}; reference points: {len(rec.points3D)}; mouse images -> {size} px")
PY
# the two models (binary mouse model as is, the chair reference as text) xz-compressed: 0.8 MB instead of 2.3
tar -C "$tmp/models" -cf - mouse chair_ref | xz -9e > $P/data/models.tar.xz
write_commit

du -ab $P/slangpy.tar.xz $P/pylibs/* $P/wheels/* $P/data/models.tar.xz | awk '{printf "  %6.2f MB  %s\n", $1/1e6, $2}'
for d in debs data/chair data/mouse_images; do printf "  %6.2f MB  %s\n" "$(du -sb $P/$d | cut -f1 | awk '{print $1/1e6}')" "$P/$d"; done
carried_size
