"""The ground-truth scenes (issue 47, item 4), their camera paths, the benchmark sizes and
the ground-truth surface.

World: metres, +z up, the floor (or the room's floor) is the plane z = 0. Every scene is
enclosed (a textured floor and a backdrop room far away, or the room itself), so no ray
leaves it. Scenes:

* ``a`` chair: seat, four thin legs (the back two rise into the back posts), three back
  slats and a top rail on a tiled floor; a full orbit at two heights.
* ``b`` can: a cylinder with a slightly wider lid on a tiled floor; a partial orbit of
  200 degrees at two heights.
* ``c`` small: a small toy (a box with a ball on it, about 0.2 m) on a large floor, seen
  from a walk around it at 3 m (the object is about 5% of the frame's width).
* ``d`` table: a toy on a textureless (one colour) table top; a full orbit.
* ``e`` room: a textured room with furniture (sofa, table, cabinet), cameras inside near
  its centre looking outwards; scored on the whole surface, meshed with ``--mesh-bounds scene``.

Labels of the ground-truth surface: ``object`` (the subject), ``support`` (what it
stands on: the floor of a-c, the table of d) and ``background`` (the rest). Parts flagged
``thin`` (legs, slats) are scored on their own (benchmarks/mesh_gt/score.py).

The ground-truth surface is every part's surface sampled on a near-uniform grid of
spacing ``h`` (a quarter of tau at 0.5%), less the points inside another part; points on
another part's surface (faces in contact, hidden from every view) are kept but flagged
not visible: a mesh may close there (accuracy), it need not (completeness). Object scenes keep the samples inside
the object's box grown by REGION_GROW of its diagonal (what scoring reads), the room all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .geometry import Box, Cylinder, Shape, Sphere
from .raycast import Camera, look_at
from .texture import Texture

LABELS = ("object", "support", "background")
HIDDEN_TOL = 1e-6   # metres: a sample this close to (or inside) another part is hidden
REGION_GROW = 0.05  # object scenes keep ground truth within the object box grown by 5% of its diagonal
MIN_SEEN = 2        # a ground-truth point counts for completeness when at least this many views see it


@dataclass(frozen=True)
class Part:
    """One solid of a scene: its name (unique in the scene), shape, texture, label (one of
    LABELS) and whether it is a thin part scored on its own."""

    name: str
    shape: Shape
    texture: Texture
    label: str = "object"
    thin: bool = False


@dataclass(frozen=True)
class Size:
    """A benchmark size: image size in pixels, views, sub-pixel rays per side, sparse
    points written, and the training steps passed to `spirula run` (None: its default)."""

    name: str
    width: int
    height: int
    views: int
    supersample: int
    points: int
    steps: int | None
    run_args: tuple[str, ...] = ()


SIZES = {
    # CI: software Vulkan on 2 cores, train + mesh of a scene in a few minutes; the face
    # budget and texture size only cut the mesh stage's time (its atlas and bake), the
    # geometry is made at the defaults
    "ci": Size("ci", 200, 150, 32, 2, 8000, 500, ("--mesh-faces", "50000", "--mesh-texture-size", "512")),
    # the GPU machine: `spirula run` at its default schedule; one ray per pixel (800 px is
    # sharp enough, and 4 rays would cost ~5 minutes of rendering per scene on 16 cores)
    "gpu": Size("gpu", 800, 600, 120, 1, 30000, None),
}


@dataclass
class Scene:
    """A scene: its parts, how its cameras are placed (``cameras(size, rng)``), its kind
    ("object": scored in the object's box, the support excluded from completeness; "room":
    the whole surface) and the extra `spirula run` options it is meshed with."""

    name: str
    title: str
    kind: str
    parts: list[Part]
    cameras: object  # callable (Size, np.random.Generator) -> list[Camera]
    mesh_args: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)

    def object_box(self) -> tuple[np.ndarray, np.ndarray]:
        """(lo [3], hi [3]) metres: the bounds of the ``object`` parts (room: of every part
        but the backdrop walls, i.e. the room's box)."""
        parts = [p for p in self.parts if p.label == "object"] if self.kind == "object" else self.parts
        los, his = zip(*(p.shape.bounds() for p in parts))
        return np.min(los, 0), np.max(his, 0)

    def diagonal(self) -> float:
        lo, hi = self.object_box()
        return float(np.linalg.norm(hi - lo))

    def thin_parts(self) -> list[str]:
        return [p.name for p in self.parts if p.thin]


def _intrinsics(size: Size, hfov_deg: float) -> tuple[float, float, float, float]:
    f = size.width / 2 / np.tan(np.radians(hfov_deg) / 2)
    return f, f, size.width / 2, size.height / 2


def _ring_cameras(size: Size, centre, radius: float, heights, hfov: float, arc=(0.0, 360.0),
                  rng=None, aim_jitter: float = 0.0, height_jitter: float = 0.0) -> list[Camera]:
    """size.views cameras split over rings at ``heights`` (metres) on circles of ``radius``
    around ``centre``'s vertical axis, looking at ``centre`` (with ``aim_jitter`` metres of
    seeded noise on the aim point), azimuths spread over ``arc`` degrees (a full circle:
    each ring turned half a step from the previous)."""
    fx, fy, cx, cy = _intrinsics(size, hfov)
    centre = np.asarray(centre, float)
    full = abs(arc[1] - arc[0]) >= 360.0
    per = [size.views // len(heights) + (k < size.views % len(heights)) for k in range(len(heights))]
    cams = []
    for k, (z, n) in enumerate(zip(heights, per)):
        if full:
            az = arc[0] + (np.arange(n) + 0.5 * (k % 2)) * 360.0 / n
        else:
            az = np.linspace(arc[0], arc[1], n) + (0.5 * (arc[1] - arc[0]) / max(n - 1, 1) if k % 2 else 0.0)
            az = np.minimum(az, arc[1])
        for a in np.radians(az):
            eye = centre + [radius * np.cos(a), radius * np.sin(a), 0.0]
            eye[2] = z + (rng.normal(0, height_jitter) if rng is not None and height_jitter else 0.0)
            aim = centre + (rng.normal(0, aim_jitter, 3) if rng is not None and aim_jitter else 0.0)
            cams.append(Camera(look_at(eye, aim), fx, fy, cx, cy, size.width, size.height))
    return cams


def _backdrop(half: float, height: float, seed: int, floor: Texture) -> list[Part]:
    """A floor slab (top at z = 0) and the walls and ceiling of a room of half-width
    ``half`` around it, both textured."""
    walls = Texture("noise", (0.78, 0.80, 0.86), (0.30, 0.40, 0.62), scale=half / 6, seed=seed)
    return [
        Part("floor", Box((-half, -half, -0.1), (half, half, 0.0)), floor, "support"),
        Part("walls", Box((-half, -half, -0.1), (half, half, height), inside=True), walls, "background"),
    ]


def chair() -> Scene:
    wood = Texture("noise", (0.55, 0.36, 0.20), (0.85, 0.66, 0.42), scale=0.04, seed=3)
    cushion = Texture("noise", (0.70, 0.12, 0.10), (0.95, 0.85, 0.70), scale=0.05, seed=4)
    s, leg_h, top = 0.0175, 0.42, 0.95
    parts = [Part("seat", Box((-0.22, -0.21, 0.42), (0.22, 0.21, 0.46)), cushion)]
    for name, x, y, z1 in (("leg_front_left", -0.185, -0.175, leg_h), ("leg_front_right", 0.185, -0.175, leg_h),
                           ("leg_back_left", -0.185, 0.175, top), ("leg_back_right", 0.185, 0.175, top)):
        parts.append(Part(name, Box((x - s, y - s, 0.0), (x + s, y + s, z1)), wood, thin=True))
    parts.append(Part("rail", Box((-0.2025, 0.165, 0.88), (0.2025, 0.185, 0.94)), wood))
    for k, x in enumerate((-0.09, 0.0, 0.09)):
        parts.append(Part(f"slat_{k}", Box((x - 0.02, 0.167, 0.46), (x + 0.02, 0.183, 0.88)), wood, thin=True))
    parts += _backdrop(6.0, 4.0, 11, Texture("tiles", (0.62, 0.60, 0.55), (0.42, 0.44, 0.47), scale=0.3, seed=5))
    return Scene("a", "chair, full orbit (thin legs and slats)", "object", parts,
                 lambda size, rng: _ring_cameras(size, (0.0, 0.0, 0.45), 1.9, (0.85, 1.55), 55.0))


def can() -> Scene:
    label = Texture("noise", (0.80, 0.10, 0.12), (0.96, 0.94, 0.90), scale=0.02, seed=21)
    metal = Texture("noise", (0.62, 0.64, 0.68), (0.35, 0.36, 0.40), scale=0.015, seed=22)
    parts = [Part("body", Cylinder(0.0, 0.0, 0.06, 0.0, 0.15), label),
             Part("lid", Cylinder(0.0, 0.0, 0.063, 0.15, 0.162), metal)]
    parts += _backdrop(3.0, 2.5, 23, Texture("tiles", (0.80, 0.78, 0.72), (0.55, 0.50, 0.45), scale=0.15, seed=24))
    return Scene("b", "can, partial orbit of 200 degrees", "object", parts,
                 lambda size, rng: _ring_cameras(size, (0.0, 0.0, 0.08), 0.42, (0.22, 0.42), 50.0,
                                                 arc=(-190.0, 10.0)))


def small() -> Scene:
    toy = Texture("noise", (0.15, 0.45, 0.80), (0.95, 0.80, 0.20), scale=0.02, seed=31)
    ball = Texture("noise", (0.85, 0.25, 0.55), (0.95, 0.95, 0.95), scale=0.015, seed=32)
    parts = [Part("block", Box((-0.09, -0.07, 0.0), (0.09, 0.07, 0.1)), toy),
             Part("ball", Sphere((0.0, 0.0, 0.14), 0.055), ball)]
    parts += _backdrop(15.0, 5.0, 33, Texture("tiles", (0.55, 0.58, 0.52), (0.38, 0.36, 0.33), scale=0.5, seed=34))
    return Scene("c", "small object on a large floor, seen from 3 m", "object", parts,
                 lambda size, rng: _ring_cameras(size, (0.0, 0.0, 0.08), 3.0, (1.5,), 60.0, rng=rng,
                                                 aim_jitter=0.25, height_jitter=0.05))


def table() -> Scene:
    toy = Texture("noise", (0.20, 0.55, 0.30), (0.92, 0.88, 0.30), scale=0.02, seed=41)
    ball = Texture("noise", (0.20, 0.25, 0.75), (0.92, 0.92, 0.96), scale=0.015, seed=42)
    top = Texture("plain", (0.84, 0.82, 0.78))
    wood = Texture("noise", (0.45, 0.30, 0.18), (0.70, 0.55, 0.38), scale=0.05, seed=43)
    z = 0.75
    parts = [Part("block", Box((-0.07, -0.05, z), (0.07, 0.05, z + 0.08)), toy),
             Part("ball", Sphere((0.0, 0.0, z + 0.12), 0.045), ball),
             Part("table_top", Box((-0.6, -0.4, z - 0.04), (0.6, 0.4, z)), top, "support")]
    for k, (x, y) in enumerate(((-0.55, -0.35), (0.55, -0.35), (-0.55, 0.35), (0.55, 0.35))):
        parts.append(Part(f"table_leg_{k}", Box((x - 0.025, y - 0.025, 0.0), (x + 0.025, y + 0.025, z - 0.04)),
                          wood, "support"))
    parts += _backdrop(4.0, 2.8, 44, Texture("tiles", (0.60, 0.55, 0.50), (0.40, 0.42, 0.45), scale=0.3, seed=45))
    parts[-2] = Part("floor", parts[-2].shape, parts[-2].texture, "background")  # the table is the support
    return Scene("d", "object on a textureless table top, full orbit", "object", parts,
                 lambda size, rng: _ring_cameras(size, (0.0, 0.0, z + 0.06), 0.55, (z + 0.25, z + 0.45), 50.0))


def room() -> Scene:
    plaster = Texture("noise", (0.85, 0.82, 0.74), (0.55, 0.62, 0.70), scale=0.25, seed=51)
    floor = Texture("tiles", (0.60, 0.45, 0.30), (0.45, 0.32, 0.22), scale=0.4, seed=52)
    fabric = Texture("noise", (0.25, 0.35, 0.55), (0.75, 0.70, 0.60), scale=0.08, seed=53)
    wood = Texture("noise", (0.50, 0.33, 0.20), (0.80, 0.62, 0.40), scale=0.06, seed=54)
    paint = Texture("noise", (0.90, 0.90, 0.88), (0.35, 0.55, 0.40), scale=0.1, seed=55)
    lo, hi = (-2.5, -2.0, -0.05), (2.5, 2.0, 2.6)
    parts = [Part("walls", Box(lo, hi, inside=True), plaster, "background"),
             Part("floor", Box(lo, (2.5, 2.0, 0.0)), floor, "support"),
             Part("sofa_seat", Box((-1.2, 1.1, 0.0), (0.6, 2.0, 0.45)), fabric, "object"),
             Part("sofa_back", Box((-1.2, 1.75, 0.45), (0.6, 2.0, 0.9)), fabric, "object"),
             Part("cabinet", Box((1.9, -1.2, 0.0), (2.5, -0.4, 1.6)), paint, "object"),
             Part("table_top", Box((-0.4, -1.5, 0.70), (0.4, -0.9, 0.74)), wood, "object"),
             Part("lamp", Sphere((-2.0, -1.5, 0.3), 0.3), paint, "object")]
    for k, (x, y) in enumerate(((-0.36, -1.46), (0.36, -1.46), (-0.36, -0.94), (0.36, -0.94))):
        parts.append(Part(f"table_leg_{k}", Box((x - 0.02, y - 0.02, 0.0), (x + 0.02, y + 0.02, 0.70)), wood,
                          "object", thin=True))

    def cameras(size: Size, rng) -> list[Camera]:
        fx, fy, cx, cy = _intrinsics(size, 75.0)
        heights = (1.2, 1.6)
        per = [size.views // 2 + (k < size.views % 2) for k in range(2)]
        out = []
        for k, (z, n) in enumerate(zip(heights, per)):
            for a in (np.arange(n) + 0.5 * k) * 2 * np.pi / n:
                eye = np.array([0.45 * np.cos(a), 0.35 * np.sin(a), z])
                aim = eye + [np.cos(a), np.sin(a), -0.35 if k == 0 else -0.15]
                out.append(Camera(look_at(eye, aim), fx, fy, cx, cy, size.width, size.height))
        return out

    return Scene("e", "room seen from inside", "room", parts, cameras, mesh_args=("--mesh-bounds", "scene"))


SCENES = {"a": chair, "b": can, "c": small, "d": table, "e": room}


def get_scene(name: str) -> Scene:
    """The scene named ``name`` (a-e); ValueError naming the known ones otherwise."""
    if name not in SCENES:
        raise ValueError(f"unknown scene {name!r}: the scenes are {', '.join(SCENES)}")
    return SCENES[name]()


# ------------------------------------------------------------------ ground-truth surface


@dataclass
class GroundTruth:
    """The ground-truth surface of a scene (what the scorer reads; gt.npz / gt.json).

    points [N, 3] float64 and normals [N, 3] float64 (unit, pointing to where the surface
    is seen from), part [N] int32 (index into ``parts``), visible [N] bool (False: a face
    in contact with another part, never seen but a correct place for a mesh to close,
    e.g. the floor under an object); parts: list of dicts (name, label, thin);
    object_lo / object_hi [3] metres; kind "object" | "room"; spacing: the grid spacing
    of the samples, metres; views [N] int32 or None: how many of the dataset's views see
    each point (benchmarks/mesh_gt/writer.py; None: not known, every point counts as seen).
    What a mesh must cover (completeness, recall) is the visible points seen by at least
    MIN_SEEN views: the underside of a seat above every camera is not asked for."""

    points: np.ndarray
    normals: np.ndarray
    part: np.ndarray
    visible: np.ndarray
    parts: list[dict]
    object_lo: np.ndarray
    object_hi: np.ndarray
    kind: str
    spacing: float
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)
    views: np.ndarray | None = None

    @property
    def diagonal(self) -> float:
        return float(np.linalg.norm(self.object_hi - self.object_lo))

    def label_of_points(self) -> np.ndarray:
        """[N] label names (object / support / background) of the points."""
        return np.asarray([p["label"] for p in self.parts])[self.part]

    def mask(self, label: str | None = None, part: str | None = None, seen: bool = True) -> np.ndarray:
        """[N] bool: the points of ``label`` and/or of the part named ``part``; with ``seen``
        only those a mesh must cover (visible, and seen by at least MIN_SEEN views)."""
        m = np.ones(len(self.points), bool)
        if seen:
            m &= self.visible
            if self.views is not None:
                m &= self.views >= MIN_SEEN
        if label is not None:
            m &= self.label_of_points() == label
        if part is not None:
            m &= self.part == [p["name"] for p in self.parts].index(part)
        return m


def _clip_box(shape: Box, lo: np.ndarray, hi: np.ndarray) -> Box | None:
    """The solid box shape.lo..hi clipped to lo..hi, or None when they do not overlap."""
    a, b = np.maximum(shape.lo, lo), np.minimum(shape.hi, hi)
    if np.any(a >= b):
        return None
    return Box(tuple(a), tuple(b))


def surface_samples(parts: list[Part], spacing: float, region: tuple[np.ndarray, np.ndarray] | None = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(points [N, 3], normals [N, 3], part index [N] int32, visible [N] bool) of the parts'
    surfaces sampled at ``spacing`` metres: samples inside another part (deeper than
    HIDDEN_TOL) dropped; samples on another part's surface (within HIDDEN_TOL: a face in
    contact, as a leg's top under the seat or an object's base on the floor) kept with
    visible False, the others visible True. Only samples inside ``region`` (lo, hi) when
    given (boxes are clipped to it before sampling, so a large floor costs only its part
    in the region)."""
    pts, nrm, idx, vis = [], [], [], []
    for k, part in enumerate(parts):
        shape = part.shape
        if region is not None and isinstance(shape, Box):
            clipped = _clip_box(shape, *region)
            if clipped is None:
                continue
            p, n = clipped.sample(spacing)
            on = np.abs(shape.sdf(p)) < HIDDEN_TOL  # faces made by the clip are not surface
            p, n = p[on], (-n if shape.inside else n)[on]
        else:
            p, n = shape.sample(spacing)
        if region is not None:
            inside = np.all((p >= region[0]) & (p <= region[1]), axis=1)
            p, n = p[inside], n[inside]
        least = np.full(len(p), np.inf)
        for j, other in enumerate(parts):
            if j != k and len(p):
                least = np.minimum(least, other.shape.sdf(p))
        keep = least > -HIDDEN_TOL
        pts.append(p[keep])
        nrm.append(n[keep])
        idx.append(np.full(int(keep.sum()), k, np.int32))
        vis.append(least[keep] >= HIDDEN_TOL)
    return np.concatenate(pts), np.concatenate(nrm), np.concatenate(idx), np.concatenate(vis)


def ground_truth(scene: Scene) -> GroundTruth:
    """The scene's ground-truth surface at spacing tau(0.5%) / 4 (module docstring)."""
    lo, hi = scene.object_box()
    diag = float(np.linalg.norm(hi - lo))
    spacing = 0.005 * diag / 4
    region = None
    if scene.kind == "object":
        grow = REGION_GROW * diag
        region = (lo - grow, hi + grow)
    p, n, k, vis = surface_samples(scene.parts, spacing, region)
    parts = [{"name": q.name, "label": q.label, "thin": q.thin} for q in scene.parts]
    return GroundTruth(p, n, k, vis, parts, lo, hi, scene.kind, spacing)
