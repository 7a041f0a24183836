"""Wide cameras through the dataset loader: faces as cameras, their sources, the hold-out
and appearance slots by source image, the readers' refusals (spirula/engine/ingest/load.py,
spirula/engine/ingest/colmap.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spirula.engine.errors import DatasetError
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.camera_model import CameraModel
from spirula.engine.ingest.faces import Equirect, split_faces
from tests.ingest.synth import random_pose, write_colmap_text, write_image

F180 = 80 / (math.pi / 2)  # a 180-degree lens across 160 px


def _dataset(root, cameras, images, rng):
    """A COLMAP text dataset: cameras (id, model, w, h, params), images (name, camera id, w, h)."""
    pts = rng.normal(size=(20, 3))
    write_colmap_text(root / "sparse" / "0", cameras,
                      [(i + 1, random_pose(rng), cid, name, 0) for i, (name, cid, _, _) in enumerate(images)],
                      pts, rng.integers(0, 255, (20, 3), dtype=np.uint8))
    pixels = {}
    for name, _, w, h in images:
        pixels[name] = write_image(root / "images" / name, w, h, rng)
    return pixels


def test_fisheye_and_equirect_images_become_faces(tmp_path):
    rng = np.random.default_rng(5)
    pixels = _dataset(tmp_path, [(1, "SIMPLE_RADIAL_FISHEYE", 160, 160, (F180, 80.0, 80.0, 0.0)),
                                 (2, "EQUIRECTANGULAR", 128, 64, (128, 64))],
                      [(f"f{i}.png", 1, 160, 160) for i in range(3)] + [(f"e{i}.png", 2, 128, 64) for i in range(3)],
                      rng)
    ds = load_dataset(tmp_path, 0, face_size=48)
    by_source: dict[str, list] = {}
    for c in ds.cameras:
        by_source.setdefault(c.source, []).append(c)
        assert c.name == f"{c.source}#{c.face}"
    assert sorted(by_source) == ["e0.png", "e1.png", "e2.png", "f0.png", "f1.png", "f2.png"]
    assert all(len(v) == 5 for k, v in by_source.items() if k.startswith("f"))   # no back face
    assert all(len(v) == 6 for k, v in by_source.items() if k.startswith("e"))
    # each face is the split's image of its source, with the split's camera and w2c
    faces = {f.name: f for f in split_faces(CameraModel("SIMPLE_RADIAL_FISHEYE", 160, 160, F180, F180, 80, 80, (0.0,)),
                                            48)}
    c = next(c for c in ds.cameras if c.name == "f1.png#right")
    np.testing.assert_array_equal(c.image, faces["right"](pixels["f1.png"]))
    assert (c.width, c.height, c.fx, c.cx) == (faces["right"].camera.width, faces["right"].camera.height,
                                               faces["right"].camera.fx, faces["right"].camera.cx)
    # the hold-out takes whole images; the faces of an image share one appearance slot
    train, test = ds.split(2)
    held = {ds.cameras[i].source for i in test}
    assert held == {"e0.png", "e2.png", "f1.png"}
    assert not held & {ds.cameras[i].source for i in train}
    slots, names = ds.appearance_slots()
    assert names == sorted(by_source)
    assert all(names[s] == c.source for s, c in zip(slots, ds.cameras))
    from spirula.engine.ingest.load import undistortion_notes

    assert any("training on 3 images of EQUIRECTANGULAR 128x64 as 6 pinhole faces each" in w
               for w in undistortion_notes(ds.undistortion))
    entry = next(u for u in ds.undistortion if u["camera"].startswith("SIMPLE_RADIAL_FISHEYE"))
    assert entry["images"] == 3 and [f["face"] for f in entry["faces"]] == ["front", "right", "left", "up", "down"]


def test_crop_mode_keeps_the_single_pinhole_image_and_skips_panoramas(tmp_path):
    rng = np.random.default_rng(6)
    _dataset(tmp_path, [(1, "SIMPLE_RADIAL_FISHEYE", 160, 160, (F180, 80.0, 80.0, 0.0)),
                        (2, "EQUIRECTANGULAR", 128, 64, (128, 64))],
             [("f0.png", 1, 160, 160), ("f1.png", 1, 160, 160), ("e0.png", 2, 128, 64)], rng)
    ds = load_dataset(tmp_path, 0, wide_lens="crop")
    assert [c.name for c in ds.cameras] == ["f0.png", "f1.png"]
    assert all(c.source == "" for c in ds.cameras)
    assert any("EQUIRECTANGULAR 128x64: a 360-degree panorama has no single pinhole image" in w and "e0.png" in w
               for w in ds.warnings)


def test_an_equirect_camera_that_is_not_two_to_one_is_named(tmp_path):
    rng = np.random.default_rng(7)
    _dataset(tmp_path, [(1, "EQUIRECTANGULAR", 120, 64, (120, 64))], [("e0.png", 1, 120, 64)], rng)
    with pytest.raises(DatasetError) as e:
        load_dataset(tmp_path, 0)
    msg = str(e.value)
    assert "\n" not in msg
    assert "cameras.txt" in msg and "an equirectangular image must be 2:1, not 120x64" in msg


def test_the_memory_preflight_counts_the_faces(tmp_path):
    from spirula.engine.config import run_config
    from spirula.engine.preflight import estimate

    rng = np.random.default_rng(8)
    _dataset(tmp_path, [(1, "SIMPLE_RADIAL_FISHEYE", 160, 160, (F180, 80.0, 80.0, 0.0)),
                        (2, "EQUIRECTANGULAR", 128, 64, (128, 64))],
             [(f"f{i}.png", 1, 160, 160) for i in range(2)] + [(f"e{i}.png", 2, 128, 64) for i in range(2)], rng)
    cfg = run_config({"max_size": 64, "eval_every": 2})
    est = estimate(tmp_path, cfg)
    ds = load_dataset(tmp_path, 64)
    assert sorted(est.sizes) == sorted((c.width, c.height) for c in ds.cameras)
    train, _ = ds.split(2)
    assert sorted(est.sizes[i] for i in est.train) == sorted((ds.cameras[i].width, ds.cameras[i].height) for i in train)
    assert est.native_pixels == 160 * 160


def test_the_loader_finds_a_circular_fisheyes_image_circle(tmp_path):
    from PIL import Image

    from spirula.engine.ingest.load import undistortion_notes

    rng = np.random.default_rng(10)
    f = 70.0 / math.radians(110)
    _dataset(tmp_path, [(1, "SIMPLE_RADIAL_FISHEYE", 200, 150, (f, 100.0, 75.0, 0.0))],
             [(f"c{i}.png", 1, 200, 150) for i in range(2)], rng)
    v, u = np.mgrid[0:150, 0:200] + 0.5
    for i in range(2):
        img = rng.integers(40, 256, (150, 200, 3), dtype=np.uint8)
        img[np.hypot(u - 100, v - 75) > 70] = 0
        Image.fromarray(img).save(tmp_path / "images" / f"c{i}.png")
    ds = load_dataset(tmp_path, 0, face_size=48)
    assert all(c.image.max(2).min() >= 12 for c in ds.cameras)   # no black pixel in any face
    assert any("a circular image: the lens footprint ends at 108" in n for n in undistortion_notes(ds.undistortion))


def test_a_wide_images_mask_is_split_into_its_faces(tmp_path):
    """A masks/ folder beside fisheye images: each face's mask is the split of the image's
    mask, resampled as its image (a fresh user's 360 capture kept no mask before)."""
    from PIL import Image

    from spirula.engine.ingest.images import resize

    rng = np.random.default_rng(11)
    _dataset(tmp_path, [(1, "SIMPLE_RADIAL_FISHEYE", 160, 160, (F180, 80.0, 80.0, 0.0))],
             [(f"f{i}.png", 1, 160, 160) for i in range(2)], rng)
    (tmp_path / "masks").mkdir()
    mask = np.full((160, 160), 255, np.uint8)
    mask[:, :60] = 0   # the left part of every image is masked out
    for i in range(2):
        Image.fromarray(mask).save(tmp_path / "masks" / f"f{i}.png.png")
    ds = load_dataset(tmp_path, 32, face_size=48, masks="ignore")
    assert ds.masks == "ignore" and ds.cameras and all(c.mask is not None for c in ds.cameras)
    faces = {f.name: f for f in split_faces(CameraModel("SIMPLE_RADIAL_FISHEYE", 160, 160, F180, F180, 80, 80, (0.0,)),
                                            48)}
    for c in ds.cameras:
        want = resize(faces[c.face](mask[..., None])[..., 0], c.width, c.height)
        np.testing.assert_array_equal(c.mask, want)
        assert c.mask.shape == c.image.shape[:2]
    left = next(c for c in ds.cameras if c.face == "left")
    right = next(c for c in ds.cameras if c.face == "right")
    assert left.mask.mean() < 60 and right.mask.mean() > 250   # the masked side lands in the left face
