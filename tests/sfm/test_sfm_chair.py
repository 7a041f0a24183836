"""SfM (spirula.engine.sfm) on a small subset of the office-chair frames at low resolution: the
frames register, the poses agree with the independent reference model after a Sim(3)
alignment, and the undistorted model is a dataset our reader (and pycolmap) opens."""

import numpy as np
import pytest
from spirula.engine.ingest import load_dataset
from spirula.engine.sfm import SfmConfig, SfmError, run_sfm, undistort
from spirula.engine.sfm.align import compare_poses, poses_by_name
from PIL import Image

N_FRAMES = 14
STRIDE = 2      # every 2nd reference frame: about 6 degrees apart, 14 frames cover ~80 degrees
SIZE = 320      # below ~300 px incremental mapping rarely finds an initial pair with 100 inliers


@pytest.fixture(scope="module")
def chair_subset(shared_data, tmp_path_factory):
    ref = shared_data / "office_chair" / "reference"
    out = tmp_path_factory.mktemp("chair_frames")
    names = [f"{i:04d}.jpg" for i in range(1, STRIDE * N_FRAMES + 1, STRIDE)]
    for n in names:
        with Image.open(ref / "images" / n) as im:
            w, h = im.size
            s = SIZE / max(w, h)
            im.resize((round(w * s), round(h * s)), Image.Resampling.LANCZOS).save(out / n, quality=95)
    size = Image.open(out / names[0]).size
    return out, names, size, ref / "sparse" / "0"


# incremental, seed 3, one thread: stopped at 5 of 14 images before registration was
# retried with fewer inliers (spirula/engine/sfm/mapping.py); CI once stopped at 3 with the defaults
@pytest.mark.parametrize("mapper,seed,threads", [("global", 0, -1), ("incremental", 0, -1), ("incremental", 3, 1)])
def test_chair_subset_registers_and_matches_reference(chair_subset, tmp_path, mapper, seed, threads):
    frames, names, size, reference = chair_subset
    reports = []
    cfg = SfmConfig(mapper=mapper, fallback=False, seed=seed, num_threads=threads)
    summary = run_sfm(frames, names, {"video": names}, {"video": size}, "video", tmp_path / "sfm", cfg,
                      report=lambda what, d, t: reports.append(what))
    assert summary["registered"] >= N_FRAMES - 1, summary
    assert summary["cameras"] == 1 and summary["camera_model"] == "OPENCV"
    assert {"features", "matching (sequential)", f"{mapper} mapping"} <= set(reports)
    acc = compare_poses(poses_by_name(tmp_path / "sfm" / "sparse" / "0"), poses_by_name(reference))
    # 14 frames at 320 px against the full-resolution reference (on all 121 frames at full
    # size: 1.2 deg, 0.35 %). Observed here: global 2.4 deg / 0.8 deg relative / 0.5 %,
    # incremental 3.5 / 1.0 / 0.65 (the Sim(3) of an 80-degree arc is less well determined)
    s = acc.summary()
    assert s["median_relative_rot_err_deg"] < 2.0, s
    assert acc.median_rot_err_deg < 5.0, s
    assert acc.median_center_err_pct < 2.0, s

    if mapper == "incremental":
        return
    u = undistort(tmp_path / "sfm" / "sparse" / "0", frames, tmp_path / "dataset")
    assert u["images"] == summary["registered"]
    assert (tmp_path / "dataset" / "sparse" / "0" / "cameras.bin").is_file()
    ds = load_dataset(tmp_path / "dataset", max_size=None)
    assert len(ds.cameras) == summary["registered"] and len(ds.points) > 100
    cam = ds.cameras[0]
    assert (cam.image.shape[1], cam.image.shape[0]) == (cam.width, cam.height)
    assert abs(cam.cx - cam.width / 2) < 1 and abs(cam.cy - cam.height / 2) < 1   # pinhole, centred
    assert cam.image.reshape(-1, 3).min(axis=1).mean() > 5   # no black border left in


def test_unrelated_images_fail_with_a_clear_message(tmp_path):
    rng = np.random.default_rng(0)
    names = []
    for i in range(5):
        n = f"noise_{i}.jpg"
        Image.fromarray(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)).save(tmp_path / n)
        names.append(n)
    with pytest.raises(SfmError) as e:
        run_sfm(tmp_path, names, {"g": names}, {"g": (160, 120)}, "photos", tmp_path / "sfm", SfmConfig())
    text = str(e.value)
    assert str(tmp_path) in text or "overlap" in text
