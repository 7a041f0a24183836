"""``partition.json``: what `spirula partition split` decided, read by `train` and `merge`.

Layout of a parts folder::

    <parts>/partition.json        this file (written last, atomically)
    <parts>/part_00/              a normal COLMAP dataset (spirula/engine/partition/parts.py):
        sparse/0/*.txt            the part's cameras, images and SfM points
        images -> <dataset>/images  a link to the whole dataset's images (no copies)
        train/                    the part's training run (splat.ply, checkpoints/train.npz, ...)
    <parts>/part_01/ ...

The file (JSON, version 1): ``dataset`` (absolute path), ``model`` (the sparse model
read), ``up`` [3], ``frame`` [2][3] (ground axes e1, e2), ``bounds`` [x0, x1, y0, y1] of the
scene in ground coordinates, ``settings`` (SplitSettings), ``test`` (held-out image
names of the whole scene), ``train_cameras`` (the whole scene's training camera count),
and ``parts``: per part ``name``, ``owner`` / ``extent`` /
``region`` boxes [x0, x1, y0, y1] (an infinite owner edge is null), ``cameras`` (image
names), ``joined`` (those that joined by visibility), ``points``, ``gaussians``,
``vram_bytes``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..fileio import write_json_atomic
from .geometry import PartitionError

NAME = "partition.json"
VERSION = 1


@dataclass
class PartInfo:
    """One part as saved (boxes in ground coordinates; owner edges may be +-inf)."""

    index: int
    name: str
    owner: list[float]
    extent: list[float]
    region: list[float]
    cameras: list[str]
    joined: list[str] = field(default_factory=list)
    points: int = 0
    gaussians: int = 0
    vram_bytes: int = 0


@dataclass
class Layout:
    """A parts folder's partition.json, read back (see the module docstring)."""

    folder: Path
    dataset: Path
    model: Path
    up: np.ndarray
    frame: np.ndarray
    bounds: list[float]
    settings: dict
    test: list[str]
    parts: list[PartInfo]
    train_cameras: int = 0

    def part_dir(self, part: PartInfo) -> Path:
        return self.folder / part.name

    def owner_of(self, xyz: np.ndarray) -> np.ndarray:
        """[N] int: the index of the part owning each world point [N, 3] (every point has
        exactly one owner: the owner cells tile the ground plane)."""
        xy = np.asarray(xyz, np.float64) @ self.frame.T
        owner = np.full(len(xy), -1, np.int64)
        for p in self.parts:  # per part (a handful), every point at once
            x0, x1, y0, y1 = p.owner
            hit = (xy[:, 0] >= x0) & (xy[:, 0] < x1) & (xy[:, 1] >= y0) & (xy[:, 1] < y1)
            owner[hit & (owner < 0)] = p.index
        return owner


def part_name(index: int) -> str:
    return f"part_{index:02d}"


def _edge(v):
    return None if v is None or (isinstance(v, float) and math.isinf(v)) else float(v)


def write_layout(folder: Path, dataset: Path, model: Path, partition, names: list[str]) -> Path:
    """Write ``<folder>/partition.json`` for a :class:`spirula.engine.partition.split.Partition`
    whose camera indices refer to ``names``. Returns its path."""
    from .split import settings_dict

    parts = []
    for c in partition.cells:
        parts.append({"index": c.index, "name": part_name(c.index), "owner": [_edge(v) for v in c.owner],
                      "extent": c.extent, "region": c.region, "cameras": [names[i] for i in c.cameras],
                      "joined": [names[i] for i in c.joined], "points": c.points, "gaussians": c.gaussians,
                      "vram_bytes": c.vram_bytes})
    path = Path(folder) / NAME
    write_json_atomic(path, {"version": VERSION, "dataset": str(Path(dataset).resolve()),
                             "model": str(Path(model).resolve()), "up": partition.up.tolist(),
                             "frame": partition.frame.tolist(), "bounds": partition.bounds,
                             "settings": settings_dict(partition.settings), "test": partition.test,
                             "train_cameras": partition.train_cameras, "parts": parts})
    return path


def read_layout(folder: Path) -> Layout:
    """Read ``<folder>/partition.json``. PartitionError naming the file when it is missing,
    not JSON, of another version or lacks a field."""
    folder = Path(folder)
    path = folder / NAME
    if not path.is_file():
        raise PartitionError(f"{folder}: no {NAME} (make one with `spirula partition split <dataset> -o {folder}`)")
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise PartitionError(f"{path}: cannot be read: {e}") from e
    if d.get("version") != VERSION:
        raise PartitionError(f"{path}: version {d.get('version')!r}, this program reads version {VERSION}")
    try:
        parts = []
        for p in d["parts"]:
            inf = [-math.inf, math.inf, -math.inf, math.inf]
            owner = [inf[i] if v is None else float(v) for i, v in enumerate(p["owner"])]
            parts.append(PartInfo(int(p["index"]), str(p["name"]), owner, list(p["extent"]), list(p["region"]),
                                  list(p["cameras"]), list(p.get("joined", [])), int(p.get("points", 0)),
                                  int(p.get("gaussians", 0)), int(p.get("vram_bytes", 0))))
        return Layout(folder, Path(d["dataset"]), Path(d["model"]), np.asarray(d["up"], np.float64),
                      np.asarray(d["frame"], np.float64), list(d["bounds"]), dict(d["settings"]), list(d["test"]),
                      parts, int(d.get("train_cameras", 0)))
    except (KeyError, TypeError, ValueError) as e:
        raise PartitionError(f"{path}: malformed ({type(e).__name__}: {e})") from e
