"""Input class: camera sets the split or the scene scale cannot take as they are. A
dataset whose images would all be held out (one image, or --eval-every 1) trains on all
of them and says so; one with one camera far from the others (a gross pose error) keeps
its scene scale from the others and names the image."""

from __future__ import annotations

import numpy as np
import pytest

from spirula.engine.cli.main import main
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.dataset import Camera, Dataset, camera_extent, camera_outliers, holdout_split
from spirula.engine.splat.scene_scale import training_extent

from .fixtures import look_at_w2c, ring_dataset


def _dataset(centers: np.ndarray, points: np.ndarray | None = None) -> Dataset:
    img = np.full((4, 4, 3), 90, np.uint8)
    cams = [Camera(f"im{i:03d}.png", None, 4, 4, 3.0, 3.0, 2.0, 2.0, look_at_w2c(c, np.array([0.0, 0.0, 0.01])), img)
            for i, c in enumerate(centers)]
    return Dataset(root="synthetic", cameras=cams, points=points)


@pytest.mark.parametrize("n,k,train,test,noted", [
    (1, 8, [0], [], True), (5, 1, [0, 1, 2, 3, 4], [], True), (5, 8, [1, 2, 3, 4], [0], False),
    (17, 8, [i for i in range(17) if i % 8], [0, 8, 16], False), (3, 0, [0, 1, 2], [], False)])
def test_holdout_never_leaves_nothing_to_train(n, k, train, test, noted):
    tr, te, note = holdout_split(n, k)
    assert (tr, te) == (train, test)
    assert (note is not None) == noted
    if noted:
        assert "no held-out evaluation" in note and f"--eval-every {k} " in note


def _reference_outliers(c: np.ndarray, factor: float = 4.0) -> np.ndarray:
    """The rule written out independently: distance from the per-axis median, robust
    radius = median + 3 x 1.4826 x MAD."""
    med = np.array([np.sort(c[:, j])[len(c) // 2] if len(c) % 2 else np.sort(c[:, j])[len(c) // 2 - 1:len(c) // 2 + 1].mean()
                    for j in range(3)])
    d = np.sqrt(((c - med) ** 2).sum(1))
    m = np.percentile(d, 50)
    mad = np.percentile(np.abs(d - m), 50)
    return d > factor * (m + 3 * 1.4826 * mad)


def _camera_sets(rng):
    a = rng.uniform(0, 2 * np.pi, 40)
    yield "ring", np.stack([4 * np.cos(a), 4 * np.sin(a), rng.normal(0, 0.1, 40)], 1)
    yield "arc", np.stack([3 * np.cos(a / 2), 3 * np.sin(a / 2), np.full(40, 0.5)], 1)
    yield "walk", np.stack([np.linspace(-5, 5, 60), rng.normal(0, 0.2, 60), rng.normal(0, 0.05, 60)], 1)
    yield "cluster", rng.normal(0, 1.0, (500, 3)) + 7.0
    g = np.stack(np.meshgrid(np.linspace(-1, 1, 5), np.linspace(-0.6, 0.6, 4)), -1).reshape(-1, 2)
    yield "forward grid", np.hstack([g, np.full((len(g), 1), -3.0)])
    t = np.linspace(0, 6 * np.pi, 90)
    yield "spiral", np.stack([(2 + t / 4) * np.cos(t), (2 + t / 4) * np.sin(t), t / 5], 1)


def test_genuine_camera_sets_have_no_outliers():
    rng = np.random.default_rng(11)
    for name, c in _camera_sets(rng):
        far, _, _ = camera_outliers(c)
        assert not far.any(), (name, np.flatnonzero(far))
        assert not _reference_outliers(c).any(), name


def test_one_far_camera_is_named_and_left_out_of_the_scale():
    rng = np.random.default_rng(5)
    for name, c in _camera_sets(rng):
        k = int(rng.integers(len(c)))
        scale = float(np.linalg.norm(c - c.mean(0), axis=1).max())
        bad = c.copy()
        bad[k] = c.mean(0) + rng.normal(size=3) / np.sqrt(3) * 300 * scale  # a gross pose error
        far, dist, _ = camera_outliers(bad)
        assert np.flatnonzero(far).tolist() == [k], name
        np.testing.assert_array_equal(far, _reference_outliers(bad))
        mid, radius = camera_extent(bad)
        keep = np.delete(bad, k, 0)
        ref = 1.1 * np.sqrt(((keep - keep.mean(0)) ** 2).sum(1)).max()
        assert radius == pytest.approx(ref, rel=1e-12), name

    ring = next(c for n, c in _camera_sets(np.random.default_rng(1)) if n == "ring")
    ring = np.vstack([ring, [[900.0, -40.0, 3.0]]])
    ds = _dataset(ring, points=np.random.default_rng(2).uniform(-1, 1, (50, 3)).astype(np.float32))
    extent, notes = training_extent(ds)
    assert extent < 1.1 * 4.5  # the ring's, not ~1000
    assert len(notes) == 1 and "im040.png" in notes[0] and "still train" in notes[0]
    assert ds.outlier_cameras()[0][0] == "im040.png"


@pytest.mark.parametrize("points", [0, 40])
def test_one_image_dataset_is_a_one_line_error(tmp_path, capsys, points):
    ring_dataset(tmp_path / "one", 1, points=points)
    out = tmp_path / "out"
    rc = main(["train", str(tmp_path / "one"), "-o", str(out), "--steps", "5", "--max-size", "48"])
    err = capsys.readouterr().err
    assert rc == 1
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.lstrip().startswith(("0%", "|"))]
    assert "Traceback" not in err
    assert any(ln.startswith("error: ") and "only one image" in ln and "view_000.png" in ln for ln in lines), err
    assert not out.exists()  # nothing left behind


def test_every_image_held_out_trains_on_all_and_says_so(tmp_path, capsys):
    import json

    ring_dataset(tmp_path / "three", 3, points=40)
    out = tmp_path / "out"
    rc = main(["train", str(tmp_path / "three"), "-o", str(out), "--steps", "3", "--max-size", "48",
               "--eval-every", "1", "--checkpoint-every", "0", "--sh-degree", "0"])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    text = captured.out + captured.err
    assert "--eval-every 1 would hold out all 3 images" in text
    train = json.loads((out / "train.json").read_text())
    assert any("no held-out evaluation" in w for w in train["warnings"])
    assert json.loads((out / "metrics.json").read_text())["psnr"] is None
    assert load_dataset(tmp_path / "three", 48).warnings == []
