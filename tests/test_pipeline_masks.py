"""The masks of a photo folder (spirula/engine/ingest/photos.py): a folder laid out as images/ +
masks/ imports its photos from images/ only and carries each photo's mask (under the imported
frame's name) into frames/.masks/, run on the folder or on its images/ alike; the undistort
stage warps them as their images (spirula/engine/sfm/colmap_undistort.py undistort_masks)."""

import json

import numpy as np
import pytest
from PIL import Image

from spirula.engine.jobs import stages
from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline

W, H = 32, 24


def _capture(root, rng):
    """root/images: 2 JPEGs and a PNG (converted to .jpg on import); root/masks: their masks,
    nerfstudio's names (<stem>.png) for two and COLMAP's (<name>.png) for one."""
    (root / "images").mkdir(parents=True)
    (root / "masks").mkdir()
    masks = {}
    for i, ext in enumerate(("jpg", "jpg", "png")):
        name = f"frame_{i:06d}.{ext}"
        Image.fromarray(rng.integers(0, 255, (H, W, 3), dtype=np.uint8)).save(root / "images" / name)
        m = np.where(rng.random((H, W)) < 0.5, 255, 0).astype(np.uint8)
        Image.fromarray(m).save(root / "masks" / (f"{name}.png" if i == 1 else f"frame_{i:06d}.png"))
        masks[f"frame_{i:06d}.jpg"] = m
    return masks


@pytest.mark.parametrize("on_images", [False, True])
def test_photos_from_images_and_their_masks_from_masks(tmp_path, on_images):
    masks = _capture(tmp_path / "cap", np.random.default_rng(3))
    source = tmp_path / "cap" / "images" if on_images else tmp_path / "cap"
    rec = run_pipeline(source, tmp_path / "proj", PipelineConfig(), until_stage="import")
    frames = tmp_path / "proj" / "frames"
    meta = json.loads((frames / "frames.json").read_text())
    assert meta["frames"] == sorted(masks)                       # no mask imported as a photo
    assert list(meta["sizes"].values()) == [[W, H]]              # one size: the 2:1 check sees the photos only
    assert meta["masks"]["frames"] == sorted(masks)
    for name, m in masks.items():
        np.testing.assert_array_equal(np.asarray(Image.open(frames / ".masks" / f"{name}.png")), m)
    assert rec["stages"][0]["summary"]["masks"] == 3


def test_photos_at_the_top_with_their_masks_in_a_masks_sub_folder(tmp_path):
    """No images/ sub-folder: the photos lie in the folder itself and masks/ inside it holds
    their masks, not more photos (the import used to take them as photos)."""
    masks = _capture(tmp_path / "cap", np.random.default_rng(5))
    for p in (tmp_path / "cap" / "images").iterdir():
        p.rename(tmp_path / "cap" / p.name)
    (tmp_path / "cap" / "images").rmdir()
    rec = run_pipeline(tmp_path / "cap", tmp_path / "proj", PipelineConfig(), until_stage="import")
    meta = json.loads((tmp_path / "proj" / "frames" / "frames.json").read_text())
    assert meta["frames"] == sorted(masks)
    assert meta["masks"]["frames"] == sorted(masks)
    assert rec["stages"][0]["summary"]["masks"] == 3


def test_a_photo_folder_without_masks_writes_none_and_the_old_masks_go(tmp_path, monkeypatch):
    src = tmp_path / "photos"
    src.mkdir()
    rng = np.random.default_rng(4)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (H, W, 3), dtype=np.uint8)).save(src / f"p{i}.jpg")
    proj = tmp_path / "proj"
    run_pipeline(src, proj, PipelineConfig(), until_stage="import")
    assert not (proj / "frames" / ".masks").exists()
    (proj / "masks").mkdir()  # a masks/ of an earlier run: an undistort stage that writes none removes it

    def fake_undistort(ctx):
        for rel in ("images", "sparse"):
            (ctx.staging / rel).mkdir()
        return {}

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "sfm", lambda ctx: (ctx.staging / "sfm").mkdir() or {})
    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "undistort", fake_undistort)
    run_pipeline(src, proj, PipelineConfig(), until_stage="undistort")
    assert (proj / "images").is_dir() and not (proj / "masks").exists()


def test_undistorted_masks_match_the_masks_undistorted_as_images(tmp_path):
    """Reference: pycolmap's own undistortion of the mask saved as an image (bilinear),
    thresholded; the nearest sampling may differ on a few edge pixels only."""
    from spirula.engine.sfm.colmap_undistort import undistort, undistort_masks

    pycolmap = pytest.importorskip("pycolmap")
    rng = np.random.default_rng(5)
    w, h = 80, 60
    v, u = np.mgrid[0:h, 0:w]
    frames = tmp_path / "frames"
    (frames / ".masks").mkdir(parents=True)
    names = ["a.png", "b.png"]
    for k, name in enumerate(names):
        m = np.where((u - 30 - 10 * k) ** 2 + (v - 28) ** 2 < 18 ** 2, 255, 0).astype(np.uint8)
        Image.fromarray(np.repeat(m[..., None], 3, axis=2)).save(frames / name)  # the "photo": the mask itself
        Image.fromarray(m).save(frames / ".masks" / f"{name}.png")
    rec = pycolmap.Reconstruction()
    rec.add_camera_with_trivial_rig(pycolmap.Camera(camera_id=1, model="OPENCV", width=w, height=h,
                                                    params=[70.0, 72.0, 41.0, 29.0, -0.25, 0.06, 0.001, -0.002]))
    for i, name in enumerate(names):
        rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=1, image_id=i + 1),
                                         pycolmap.Rigid3d(pycolmap.Rotation3d(), rng.normal(size=3)))
    (tmp_path / "model").mkdir()
    rec.write(tmp_path / "model")
    out = tmp_path / "ds"
    undistort(tmp_path / "model", frames, out, num_threads=1)
    assert undistort_masks(tmp_path / "model", out / "sparse" / "0", frames / ".masks", out / "masks") == names
    for name in names:
        ref = np.asarray(Image.open(out / "images" / name).convert("L")) >= 128
        got = np.asarray(Image.open(out / "masks" / f"{name}.png")) == 255
        assert got.shape == ref.shape
        assert (got != ref).mean() < 0.003, (got != ref).mean()  # a plain resize of the mask: ~0.01
        assert ref.mean() > 0.1 and (~ref).mean() > 0.1


def test_the_masks_reach_the_training_dataset_through_the_undistort_stage(tmp_path, monkeypatch):
    """import (real) -> SfM (a fake writing a distorted model of the frames) -> undistort (real):
    the project's masks/ beside images/, read by the training's dataset loader as masks."""
    pycolmap = pytest.importorskip("pycolmap")
    from spirula.engine.ingest import load_dataset

    masks = _capture(tmp_path / "cap", np.random.default_rng(7))
    rng = np.random.default_rng(8)

    def fake_sfm(ctx):
        rec = pycolmap.Reconstruction()
        rec.add_camera_with_trivial_rig(pycolmap.Camera(camera_id=1, model="SIMPLE_RADIAL", width=W, height=H,
                                                        params=[30.0, W / 2, H / 2, -0.05]))
        for i, name in enumerate(sorted(masks)):
            rec.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=1, image_id=i + 1),
                                             pycolmap.Rigid3d(pycolmap.Rotation3d(), rng.normal(size=3)))
        for p in rng.normal(size=(5, 3)) + [0, 0, 5]:
            rec.add_point3D(p, pycolmap.Track(), np.array([128, 128, 128], np.uint8))
        (ctx.staging / "sfm" / "sparse" / "0").mkdir(parents=True)
        rec.write(ctx.staging / "sfm" / "sparse" / "0")
        return {}

    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "sfm", fake_sfm)
    proj = tmp_path / "proj"
    rec = run_pipeline(tmp_path / "cap", proj, PipelineConfig(), until_stage="undistort")
    assert rec["stages"][-1]["summary"]["masks"] == 3
    assert sorted(p.name for p in (proj / "masks").iterdir()) == [f"{n}.png" for n in sorted(masks)]
    ds = load_dataset(proj, max_size=0, masks="ignore")
    assert ds.masks == "ignore" and all(c.mask is not None for c in ds.cameras)
    assert "3 of 3 images masked" in ds.masks_note
