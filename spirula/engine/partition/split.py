"""Split a scene into cells on its ground plane (`spirula partition split`).

The steps (VastGaussian / CityGaussian's idea of a progressive, camera-aware partition;
this code is ours):

1. Ground plane: the up axis and ground frame of spirula/engine/partition/geometry.py; every
   camera and SfM point gets 2D ground coordinates.
2. Held-out views: every ``eval_every``-th image by sorted name (the rule of
   spirula/engine/ingest/dataset.py holdout_split) is kept out of every part, so the merged
   model is scored on views no part trained on.
3. Cells: the scene's box (SfM points between their 0.5 and 99.5 percentiles) starts as
   one cell; the cell with the most load is split across its longer
   side at the median of its SfM points, until there are ``parts`` cells, or until every
   cell's part fits the budget (estimated Gaussians, or estimated VRAM). The outermost
   edges of the outer cells reach to infinity, so the owner cells tile the whole plane and
   every Gaussian has exactly one owner (half-open intervals: x0 <= x < x1).
4. Training region: the cell's finite box grown by ``overlap`` times its width (depth) on
   each side along that axis; open to infinity where the owner cell is (the points and
   cameras beyond the scene box belong to the outer cells). A part's SfM points are those
   in its region, plus, for an orbit capture, its context: the points outside the region
   that at least ``context_views`` of its cameras see. Its cameras see more than the region (around an
   object, every view sees all of it); without Gaussians there from the start, the part
   explains that content with whatever lies inside the region or drifts out of it, and the
   merge drops the one and keeps the damage of the other (mouse in 2 parts, 200 px, 1,500
   steps, software Vulkan: merged -2.20 dB against the whole run without context, +0.03
   with it). The context's Gaussians are trained and then left out by the merge. They
   cost memory: in the city test scene (cameras walking streets see far along them) the
   parts' peak VRAM went from 0.38x the whole run's to 0.73x for +0.11 dB. So
   ``context_views`` None (auto) is 2 for an orbit capture (spirula/engine/mesh/bounds.py
   convergence: the cameras look at a common point from around it; every view sees the whole object, so the parts save little memory
   anyway) and 0 otherwise.
5. Cameras: a training camera joins a part when its centre lies in the region, or when
   at least ``visibility`` of the SfM points it sees (geometry.visibility: in the image,
   in front, not hidden unless ``occlusion`` is off) lie in the cell (a camera outside that looks into it).
6. Estimates: a part's Gaussians are ``total_gaussians`` times its share of the SfM
   points (region and context, counted on the visibility subsample); its VRAM is spirula/engine/preflight.py's model (the training images as RGBA8 at
   the training size, one render's per-pixel buffers, bytes per Gaussian with MCMC), a
   lower bound (the tile intersections come on top).

Refusals (PartitionError, with the reason): no SfM points; fewer training cameras than
``parts x min_cameras``; a cell with too few points to split; a budget not met by
MAX_CELLS cells; a part with fewer than ``min_cameras`` cameras.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..config import TrainConfig
from ..ingest.dataset import holdout_split
from ..ingest.images import fit_size
from ..preflight import IMAGE_BUFFER_BYTES_PER_PIXEL, bytes_per_gaussian
from .geometry import PartitionError, SceneGeometry, ground_frame, to_ground, up_axis, visibility

MAX_CELLS = 64
ORBIT_CONTEXT_VIEWS = 2  # context_views of an orbit capture (step 4)
ORBIT_HINT = ("; with context (an orbit capture: each part's cameras see the whole object, so its context keeps "
              "every part near the whole scene's size) splitting cannot meet the budget: --context-views 0 "
              "splits it anyway, at a cost in quality")
MIN_POINTS_TO_SPLIT = 20


class ContextBudgetError(PartitionError):
    """The budget cannot be met because the parts' context (an orbit capture's) keeps each
    near the whole scene's size; without context (context_views 0) the split may succeed."""


@dataclass
class SplitSettings:
    """How to split. Exactly one budget: ``parts`` (a count), ``max_gaussians_per_part``
    or ``vram_gib`` (GiB per part, spirula/engine/preflight.py's estimate)."""

    parts: int | None = None
    max_gaussians_per_part: int | None = None
    vram_gib: float | None = None
    overlap: float = 0.15            # region growth per side, fraction of the cell's size
    visibility: float = 0.25         # share of a camera's seen points in the cell to join it
    min_cameras: int = 8             # fewest cameras a part may have
    eval_every: int = 8              # hold out every k-th image of the whole scene (0: none)
    total_gaussians: int = TrainConfig.mcmc_budget  # the whole scene's model size
    max_size: int = 1600             # training image size, for the VRAM estimate
    sh_degree: int = 3
    visibility_points: int = 20_000  # SfM points subsampled for the visibility test
    occlusion: bool = True           # a point behind a nearer one is not seen (geometry.visibility)
    context_views: int | None = None  # outside points seen by this many of a part's cameras join it (0: none; None: step 4)
    seed: int = 0

    def check(self) -> None:
        """ValueError for an impossible combination (said by the CLI)."""
        given = [v is not None for v in (self.parts, self.max_gaussians_per_part, self.vram_gib)]
        if sum(given) != 1:
            raise ValueError("give exactly one of --parts, --max-gaussians-per-part, --vram")
        if self.parts is not None and not 1 <= self.parts <= MAX_CELLS:
            raise ValueError(f"--parts must be between 1 and {MAX_CELLS}, not {self.parts}")
        if not 0.0 <= self.overlap < 0.5:
            raise ValueError(f"--overlap must be in [0, 0.5), not {self.overlap}")
        if not 0.0 < self.visibility <= 1.0:
            raise ValueError(f"--visibility must be in (0, 1], not {self.visibility}")
        if self.context_views is not None and self.context_views < 0:
            raise ValueError(f"--context-views must be 0 or more, not {self.context_views}")


@dataclass
class Cell:
    """One part. Boxes are [x0, x1, y0, y1] in ground coordinates (world units).
    owner: the cell proper, outer edges at +-inf; extent: owner clipped to the scene box;
    region: extent grown by the overlap (what the part trains; drawn finite, used open to
    infinity where the owner is: :func:`open_region`). cameras: indices into
    SceneGeometry.names (sorted); joined: those of them outside the region that joined by
    visibility. points: SfM points in the region. gaussians, vram_bytes: estimates."""

    index: int
    owner: list[float]
    extent: list[float]
    region: list[float]
    cameras: list[int] = field(default_factory=list)
    joined: list[int] = field(default_factory=list)
    points: int = 0
    gaussians: int = 0
    vram_bytes: int = 0


@dataclass
class Partition:
    """The split of one scene: ground frame ([2, 3] rows e1, e2), up [3], the scene box,
    the cells, the held-out image names, the settings, and the whole scene's training
    camera count."""

    up: np.ndarray
    frame: np.ndarray
    bounds: list[float]
    cells: list[Cell]
    test: list[str]
    settings: SplitSettings
    train_cameras: int = 0

    def crowding_warning(self, scene_points: int) -> str | None:
        """A warning when parts hold most of the scene's ``scene_points`` SfM points (with
        their context: an orbit capture, whose every view sees nearly all of it), so the
        parts save little memory over the whole scene; None otherwise."""
        crowded = [c.index for c in self.cells if scene_points and c.points >= 0.9 * scene_points]
        if len(self.cells) < 2 or not crowded:
            return None
        return (f"part{'s' if len(crowded) > 1 else ''} {', '.join(map(str, crowded))} hold most of the scene's "
                "SfM points: their cameras see nearly all of it (an orbit capture), so the parts save little "
                "memory over training the whole scene")

    def summary(self) -> list[str]:
        """One line per part (for the CLI and the panel)."""
        return [f"part {c.index}: {len(c.cameras)} cameras ({len(c.joined)} by visibility), {c.points:,} points, "
                f"~{c.gaussians:,} Gaussians, ~{c.vram_bytes / 2**30:.2f} GiB" for c in self.cells]


def inside(xy: np.ndarray, box) -> np.ndarray:
    """[N] bool: ground points [N, 2] in the half-open box [x0, x1) x [y0, y1)."""
    x0, x1, y0, y1 = box
    return (xy[:, 0] >= x0) & (xy[:, 0] < x1) & (xy[:, 1] >= y0) & (xy[:, 1] < y1)


def _is_orbit(geo: SceneGeometry) -> bool:
    """Whether the cameras look at a common point from around it (spirula/engine/mesh/bounds.py's
    convergence test: an object capture)."""
    from ..mesh.bounds import convergence

    if len(geo.w2c) < 3:
        return False
    return convergence(np.linalg.inv(geo.w2c)).converges


def context_points(geo: SceneGeometry, cameras, outside: np.ndarray, views: int, occlusion: bool = True,
                   chunk: int = 16) -> np.ndarray:
    """[P] bool: the points flagged in ``outside`` [P] that at least ``views`` of
    ``cameras`` (indices into geo.names) see (geometry.visibility), counted ``chunk``
    cameras at a time so memory stays O(chunk x P)."""
    count = np.zeros(len(geo.points), np.int32)
    idx = np.flatnonzero(outside)
    if views <= 0 or not len(idx):
        return np.zeros(len(geo.points), bool)
    cams = np.asarray(cameras, np.int64)
    for k in range(0, len(cams), chunk):
        c = cams[k:k + chunk]
        count[idx] += visibility(geo.w2c[c], geo.intrinsics[c], geo.points[idx], occlusion=occlusion).sum(axis=0)
    return count >= views


def open_box(region, owner) -> list[float]:
    """``region`` with its edges moved to infinity where ``owner``'s are infinite."""
    return [o if np.isinf(o) else r for r, o in zip(region, owner)]


def grow(box, overlap: float) -> list[float]:
    """``box`` grown by ``overlap`` x its width (height) on each side."""
    x0, x1, y0, y1 = box
    dx, dy = (x1 - x0) * overlap, (y1 - y0) * overlap
    return [x0 - dx, x1 + dx, y0 - dy, y1 + dy]


def split_scene(geo: SceneGeometry, settings: SplitSettings) -> Partition:
    """Partition ``geo`` by ``settings`` (module docstring). PartitionError with the
    reason when it cannot; ValueError for bad settings."""
    settings.check()
    if len(geo.points) == 0:
        raise PartitionError(f"{geo.model_folder}: the model has no SfM points (points3D), so nothing says where "
                             "the scene is: partitioning needs them")
    if settings.context_views is None:
        settings = replace(settings, context_views=ORBIT_CONTEXT_VIEWS if _is_orbit(geo) else 0)
    up = up_axis(geo.w2c, geo.centers)
    frame = ground_frame(up)
    cam_xy, pts_xy = to_ground(geo.centers, frame), to_ground(geo.points, frame)
    train, test, _ = holdout_split(len(geo.names), settings.eval_every)
    train_mask = np.zeros(len(geo.names), bool)
    train_mask[train] = True
    need = (settings.parts or 1) * settings.min_cameras
    if len(train) < need:
        raise PartitionError(f"{geo.root}: too small to split: {len(train)} training cameras, and {settings.parts or 1} "
                             f"parts need at least {need} ({settings.min_cameras} each, --min-cameras)")
    lo, hi = np.percentile(pts_xy, 0.5, axis=0), np.percentile(pts_xy, 99.5, axis=0)
    if np.any(hi - lo <= 0):
        raise PartitionError(f"{geo.model_folder}: the SfM points lie on a line seen from above: no ground area to split")
    bounds = [float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1])]
    rng = np.random.default_rng(settings.seed)
    sub = np.arange(len(geo.points))
    if len(sub) > settings.visibility_points:
        sub = np.sort(rng.choice(sub, settings.visibility_points, replace=False))
    seen = visibility(geo.w2c, geo.intrinsics, geo.points[sub], occlusion=settings.occlusion)
    ctx = _Context(geo, settings, cam_xy, pts_xy, pts_xy[sub], seen, train_mask)

    boxes = [bounds]
    while True:
        cells = [ctx.cell(k, b, o) for k, (b, o) in enumerate(zip(boxes, _owners(boxes, bounds)))]
        if settings.parts is not None:
            if len(boxes) >= settings.parts:
                break
            pick = int(np.argmax([int(inside(pts_xy, b).sum()) for b in boxes]))
        else:
            over = [k for k, c in enumerate(cells) if ctx.over_budget(c)]
            if not over:
                break
            if len(boxes) >= MAX_CELLS:
                c = cells[over[0]]
                error = ContextBudgetError if settings.context_views else PartitionError
                raise error(f"the budget is not met with {MAX_CELLS} cells (part {c.index}: ~{c.gaussians:,} "
                            f"Gaussians, ~{c.vram_bytes / 2**30:.2f} GiB): raise it, or lower --overlap"
                            + (ORBIT_HINT if settings.context_views else ""))
            pick = max(over, key=lambda k: cells[k].gaussians)
        try:
            boxes[pick:pick + 1] = _halve(boxes[pick], pts_xy)
        except PartitionError as e:
            if settings.parts is None and settings.context_views:  # the budget cannot be met by splitting
                raise ContextBudgetError(f"{e}{ORBIT_HINT}") from None
            raise
    for c in cells:
        if len(c.cameras) < settings.min_cameras:
            raise PartitionError(f"part {c.index} gets only {len(c.cameras)} cameras (at least {settings.min_cameras}, "
                                 "--min-cameras): use fewer parts, more --overlap or a lower --visibility")
    return Partition(up, frame, bounds, cells, [geo.names[i] for i in test], settings, len(train))


class _Context:
    """What every cell's statistics need, computed once."""

    def __init__(self, geo, settings, cam_xy, pts_xy, sub_xy, seen, train_mask):
        self.geo, self.s = geo, settings
        self.cam_xy, self.pts_xy, self.sub_xy, self.seen, self.train = cam_xy, pts_xy, sub_xy, seen, train_mask
        self.seen_total = np.maximum(seen.sum(axis=1), 1)
        mcmc = True  # the partitioned runs use MCMC's exact budget (spirula/engine/partition/run_parts.py)
        self.per_gaussian = bytes_per_gaussian(settings.sh_degree, False, mcmc)
        sizes = np.array([fit_size(int(w), int(h), settings.max_size) for w, h in geo.intrinsics[:, 4:6]])
        self.image_bytes = 4 * sizes[:, 0] * sizes[:, 1]
        self.render_bytes = IMAGE_BUFFER_BYTES_PER_PIXEL * int((sizes[:, 0] * sizes[:, 1]).max())

    def cell(self, index: int, extent, owner) -> Cell:
        region = grow(extent, self.s.overlap)
        # cameras and points: the region, open to infinity where the owner cell is (cameras
        # around an object, the far background)
        open_region = open_box(region, owner)
        in_region = inside(self.cam_xy, open_region) & self.train
        share = self.seen[:, inside(self.sub_xy, extent)].sum(axis=1) / self.seen_total
        joined = self.train & ~in_region & (share >= self.s.visibility)
        cams = np.flatnonzero(in_region | joined)
        points = int(inside(self.pts_xy, open_region).sum())
        if self.s.context_views > 0 and len(cams):
            context = ~inside(self.sub_xy, open_region) & (self.seen[cams].sum(axis=0) >= self.s.context_views)
            points += int(round(context.sum() * len(self.pts_xy) / max(len(self.sub_xy), 1)))
        gaussians = int(round(self.s.total_gaussians * points / len(self.pts_xy)))
        vram = int(self.image_bytes[cams].sum()) + self.render_bytes + gaussians * self.per_gaussian
        return Cell(index, list(owner), list(extent), region, cams.tolist(), np.flatnonzero(joined).tolist(),
                    points, gaussians, vram)

    def over_budget(self, c: Cell) -> bool:
        if self.s.max_gaussians_per_part is not None:
            return c.gaussians > self.s.max_gaussians_per_part
        return c.vram_bytes > self.s.vram_gib * 2**30


def _halve(box, pts_xy: np.ndarray) -> list[list[float]]:
    """Two boxes: ``box`` cut across its longer side at the median of its points."""
    x0, x1, y0, y1 = box
    axis = 0 if x1 - x0 >= y1 - y0 else 1
    mine = pts_xy[inside(pts_xy, box), axis]
    if len(mine) < MIN_POINTS_TO_SPLIT:
        raise PartitionError(f"too small to split: a cell of {x1 - x0:.3g} x {y1 - y0:.3g} world units holds only "
                             f"{len(mine)} SfM points (at least {MIN_POINTS_TO_SPLIT}): use fewer parts")
    lo, hi = (x0, x1) if axis == 0 else (y0, y1)
    cut = float(np.clip(np.median(mine), lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo)))
    if axis == 0:
        return [[x0, cut, y0, y1], [cut, x1, y0, y1]]
    return [[x0, x1, y0, cut], [x0, x1, cut, y1]]


def _owners(boxes: list[list[float]], bounds: list[float]) -> list[list[float]]:
    """The boxes with each edge on the scene box moved to infinity (the owner cells)."""
    out = []
    for b in boxes:
        o = list(b)
        for i, edge in enumerate(bounds):
            if b[i] == edge:
                o[i] = -np.inf if i % 2 == 0 else np.inf
        out.append(o)
    return out


def settings_dict(s: SplitSettings) -> dict:
    """The settings as saved in partition.json."""
    return asdict(s)


def same_settings(stored: dict, s: SplitSettings) -> bool:
    """Whether a partition.json's settings are ``s``'s (a rerun keeps its trained parts);
    context_views None (auto) matches what the stored split resolved it to."""
    want = settings_dict(s)
    if want.get("context_views") is None:
        want["context_views"] = stored.get("context_views")
    return stored == want
