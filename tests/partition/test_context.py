"""A part's context (spirula/engine/partition/split.py step 4): the SfM points outside its region
that enough of its cameras see join its initial points, automatically for an orbit
capture only. References here are independent: a pinhole projection written per camera
and per point, and the region test by brute force over the part's box."""

from pathlib import Path

import numpy as np
import pytest

from spirula.engine.partition.geometry import SceneGeometry, read_geometry, to_ground
from spirula.engine.pose import look_at
from spirula.engine.partition.parts_layout import read_layout
from spirula.engine.partition.parts import split_dataset
from spirula.engine.partition.split import ORBIT_CONTEXT_VIEWS, SplitSettings, context_points, open_box
from tests.partition.city import make_city, write_city

MOUSE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "mouse"


def test_context_points_count_the_views_that_see_each_point(rng):
    centres = np.c_[rng.uniform(-4, 4, (12, 2)), rng.uniform(1, 2, 12)]
    w2c = np.stack([look_at(c, rng.uniform(-1, 1, 3), (0.0, 0.0, 1.0)) for c in centres])
    intr = np.tile([40.0, 40.0, 32.0, 24.0, 64, 48], (12, 1))
    pts = rng.uniform(-3, 3, (3000, 3))
    geo = SceneGeometry(Path("."), Path("."), [f"{i}.jpg" for i in range(12)], np.arange(12), np.zeros(12, int),
                        w2c, centres, intr, pts, np.zeros((3000, 3), np.uint8))
    cams = sorted(rng.choice(12, 7, replace=False).tolist())
    outside = rng.random(3000) < 0.6
    count = np.zeros(3000, int)
    for c in cams:  # the reference: each point through each camera's pinhole
        for p in range(3000):
            x = w2c[c, :3, :3] @ pts[p] + w2c[c, :3, 3]
            if x[2] > 1e-6:
                u, v = 40 * x[0] / x[2] + 32, 40 * x[1] / x[2] + 24
                count[p] += (0 <= u < 64) and (0 <= v < 48)
    for views in (1, 2, 3):
        got = context_points(geo, cams, outside, views, occlusion=False, chunk=3)
        want = outside & (count >= views)
        assert want.sum() > 50 and np.array_equal(got, want), views
    assert not context_points(geo, cams, outside, 0).any()


@pytest.mark.skipif(not MOUSE.is_dir(), reason="needs ../shared/data/mouse")
def test_an_orbit_capture_gets_its_context_and_a_street_walk_none(tmp_path):
    split_dataset(MOUSE, tmp_path / "mouse", SplitSettings(parts=2, min_cameras=4), on_message=lambda _: None)
    layout = read_layout(tmp_path / "mouse")
    assert layout.settings["context_views"] == ORBIT_CONTEXT_VIEWS
    geo = read_geometry(MOUSE)
    frame = np.asarray(layout.frame, np.float64)
    xy = to_ground(geo.points, frame)
    for p in layout.parts:
        box = open_box(p.region, p.owner)
        in_region = (xy[:, 0] >= box[0]) & (xy[:, 0] < box[1]) & (xy[:, 1] >= box[2]) & (xy[:, 1] < box[3])
        lines = (tmp_path / "mouse" / p.name / "sparse" / "0" / "points3D.txt").read_text().splitlines()
        written = len([ln for ln in lines if ln and not ln.startswith("#")])
        # around an object each half's cameras see the other half: most of it joins
        assert written > in_region.sum() + 0.5 * (~in_region).sum(), (p.name, written, in_region.sum())
    city = tmp_path / "city"
    write_city(city, make_city(blocks=3, width=32, height=24), points=1500)
    split_dataset(city, tmp_path / "parts", SplitSettings(parts=2, min_cameras=4), on_message=lambda _: None)
    assert read_layout(tmp_path / "parts").settings["context_views"] == 0
    split_dataset(city, tmp_path / "ctx", SplitSettings(parts=2, min_cameras=4, context_views=2),
                  on_message=lambda _: None)
    counts = [len((tmp_path / d / "part_00" / "sparse" / "0" / "points3D.txt").read_text().splitlines())
              for d in ("parts", "ctx")]
    assert counts[1] > counts[0]  # asked for, the street walk gets it too


@pytest.mark.skipif(not MOUSE.is_dir(), reason="needs ../shared/data/mouse")
def test_a_budget_the_context_cannot_meet_says_so_and_splits_without_it(tmp_path):
    from spirula.engine.partition.split import ContextBudgetError, same_settings, settings_dict, split_scene

    geo = read_geometry(MOUSE)
    auto = SplitSettings(max_gaussians_per_part=150_000, min_cameras=2)
    with pytest.raises(ContextBudgetError, match="--context-views 0"):
        split_scene(geo, auto)
    off = split_scene(geo, SplitSettings(max_gaussians_per_part=150_000, min_cameras=2, context_views=0))
    assert len(off.cells) == 2 and all(c.gaussians <= 150_000 for c in off.cells)
    stored = settings_dict(off.settings)
    assert auto.context_views is None and same_settings(stored, auto)  # auto matches what the split resolved
    assert not same_settings(stored, SplitSettings(max_gaussians_per_part=150_000, min_cameras=2, context_views=2))


@pytest.mark.skipif(not MOUSE.is_dir(), reason="needs ../shared/data/mouse")
def test_parts_that_hold_the_whole_orbit_are_called_out(tmp_path):
    from spirula.engine.partition.split import split_scene

    geo = read_geometry(MOUSE)
    orbit = split_scene(geo, SplitSettings(parts=2, min_cameras=2))
    assert "an orbit capture" in orbit.crowding_warning(len(geo.points))
    bare = split_scene(geo, SplitSettings(parts=2, min_cameras=2, context_views=0))
    assert bare.crowding_warning(len(geo.points)) is None  # each half holds about half the points
    lines = []
    split_dataset(MOUSE, tmp_path / "p", SplitSettings(parts=2, min_cameras=2), on_message=lines.append)
    assert any(line.startswith("warning:") and "little memory" in line for line in lines)
