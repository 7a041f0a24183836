"""Write each part of a partition as a normal COLMAP dataset, and the whole split
(`spirula partition split <dataset> -o <parts>`).

A part folder (spirula/engine/partition/parts_layout.py shows the whole parts folder) holds
``sparse/0/cameras.txt`` (the entries of the cameras its images use, copied from the
dataset's model with their distortion, so the loader undistorts as for the whole
dataset), ``sparse/0/images.txt`` (its images with their original ids, poses and names;
no 2D observations), ``sparse/0/points3D.txt`` (the SfM points of its training region and its
context, spirula/engine/partition/split.py step 4; colours kept, no tracks) and ``images``, a symbolic link to the dataset's images folder:
no image is copied, and the reader (spirula/engine/ingest/colmap.py) takes only the images the
model lists (it says nothing of the others in a linked folder).

Each part is written into a temporary folder and renamed into place; ``partition.json``
comes last, so a parts folder with that file is complete. An existing parts folder is
refused (its trained parts would be lost) unless ``force``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from ..errors import SpirulaError
from ..fileio import fsync_dir, open_atomic
from .geometry import SceneGeometry, read_geometry, to_ground
from .parts_layout import NAME, part_name, write_layout
from .split import Partition, SplitSettings, context_points, inside, open_box, split_scene


def split_dataset(dataset: Path, out_dir: Path, settings: SplitSettings, force: bool = False,
                  on_message=print) -> Partition:
    """Split the COLMAP dataset at ``dataset`` into ``out_dir`` (module docstring).
    Returns the Partition; PartitionError / DatasetError with the reason when it cannot."""
    out_dir = Path(out_dir)
    if (out_dir / NAME).exists() and not force:
        raise SpirulaError(f"{out_dir}: already holds a partition ({NAME}); its trained parts would be lost: "
                           "choose another folder, or --force")
    geo = read_geometry(Path(dataset))
    partition = split_scene(geo, settings)
    out_dir.mkdir(parents=True, exist_ok=True)
    if force:
        (out_dir / NAME).unlink(missing_ok=True)
    for cell in partition.cells:
        write_part(geo, partition, cell, out_dir / part_name(cell.index))
    write_layout(out_dir, geo.root, geo.model_folder, partition, geo.names)
    for line in partition.summary():
        on_message(line)
    crowded = partition.crowding_warning(len(geo.points))
    if crowded:
        on_message(f"warning: {crowded}")
    on_message(f"wrote {len(partition.cells)} parts and {out_dir / NAME} ({len(partition.test)} held-out views)")
    return partition


def write_part(geo: SceneGeometry, partition: Partition, cell, folder: Path) -> None:
    """Write one part's dataset into ``folder`` (replaced whole, atomically by rename)."""
    from ..ingest.colmap_format import read_model

    model = read_model(geo.model_folder)
    tmp = folder.with_name(f".{folder.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    sparse = tmp / "sparse" / "0"
    sparse.mkdir(parents=True)
    wanted = {geo.names[i] for i in cell.cameras}
    images = [im for im in model.images.values() if im.name in wanted]
    cam_ids = sorted({im.camera_id for im in images})
    with open_atomic(sparse / "cameras.txt", "w", encoding="utf-8") as f:
        f.write("# Camera list with one line of data per camera:\n#   CAMERA_ID, MODEL, WIDTH, HEIGHT, PARAMS[]\n")
        for cid in cam_ids:
            c = model.cameras[cid]
            f.write(" ".join([str(cid), c.model, str(c.width), str(c.height)] + [repr(float(p)) for p in c.params]) + "\n")
    with open_atomic(sparse / "images.txt", "w", encoding="utf-8") as f:
        f.write("# Image list with two lines of data per image:\n"
                "#   IMAGE_ID, QW, QX, QY, QZ, TX, TY, TZ, CAMERA_ID, NAME\n#   POINTS2D[] (none kept)\n")
        for im in sorted(images, key=lambda im: im.name):
            vals = " ".join(repr(float(v)) for v in (*im.qvec, *im.tvec))
            f.write(f"{im.image_id} {vals} {im.camera_id} {im.name}\n\n")
    keep = inside(to_ground(geo.points, partition.frame), open_box(cell.region, cell.owner))
    st = partition.settings
    keep |= context_points(geo, cell.cameras, ~keep, st.context_views, st.occlusion)
    write_points_txt(sparse / "points3D.txt", geo.points[keep], geo.colors[keep])
    target = (geo.root / "images").resolve()
    try:
        os.symlink(target, tmp / "images", target_is_directory=True)
    except OSError as e:
        raise SpirulaError(f"{tmp / 'images'}: cannot link to the dataset's images {target}: {e.strerror} (parts "
                           "link to the images instead of copying them)") from e
    if folder.exists():
        train = folder / "train"
        if train.exists():  # --force keeps nothing of an earlier part's training
            shutil.rmtree(train)
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    fsync_dir(folder.parent)


def write_points_txt(path: Path, xyz: np.ndarray, rgb: np.ndarray) -> None:
    """COLMAP points3D.txt: ``id x y z r g b error`` per point (ids from 1, error 0, no
    track); xyz [P, 3] float, rgb [P, 3] uint8. Atomic."""
    n = len(xyz)
    table = np.empty((n, 8), object)
    table[:, 0] = np.arange(1, n + 1)
    table[:, 1:4] = np.asarray(xyz, np.float64)
    table[:, 4:7] = np.asarray(rgb, np.int64)
    table[:, 7] = 0.0
    with open_atomic(path, "w", encoding="utf-8") as f:
        f.write("# 3D point list with one line of data per point:\n#   POINT3D_ID, X, Y, Z, R, G, B, ERROR\n")
        np.savetxt(f, table, fmt=["%d", "%.9g", "%.9g", "%.9g", "%d", "%d", "%d", "%.1f"])
