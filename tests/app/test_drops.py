"""What a dropped path means (no Qt)."""

from spirula.app.drops import Drop, classify, classify_many, describe_many


def test_dataset_folders(tiny_dataset, tmp_path):
    assert classify(tiny_dataset).action == "dataset"
    assert classify(tiny_dataset / "transforms.json").action == "dataset"
    colmap = tmp_path / "colmap"
    (colmap / "sparse" / "0").mkdir(parents=True)
    (colmap / "sparse" / "0" / "cameras.bin").write_bytes(b"")
    assert classify(colmap).action == "dataset"


def test_ply_video_photos(tiny_dataset, tmp_path):
    (tmp_path / "g.ply").write_bytes(b"ply\n")
    assert classify(tmp_path / "g.ply").action == "splats"
    (tmp_path / "clip.MOV").write_bytes(b"")
    assert classify(tmp_path / "clip.MOV").action == "video"
    assert classify(tiny_dataset / "images").action == "photos"
    photos = sorted((tiny_dataset / "images").iterdir())[:3]
    assert [d.action for d in classify_many(photos)] == ["photos"]


def test_unsupported_drops_say_why(tiny_dataset, tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    d = classify(tmp_path / "notes.txt")
    assert d.action == "unsupported" and "'.txt'" in d.reason and ".ply" in d.reason
    empty = tmp_path / "empty"
    empty.mkdir()
    d = classify(empty)
    assert d.action == "unsupported" and "transforms.json" in d.reason and "COLMAP" in d.reason
    d = classify(tmp_path / "missing")
    assert d.action == "unsupported" and "does not exist" in d.reason
    one = next((tiny_dataset / "images").iterdir())
    assert "single photo" in classify(one).reason


def test_project_folders(tmp_path):
    stopped = tmp_path / "stopped"
    (stopped / "checkpoints").mkdir(parents=True)
    (stopped / "checkpoints" / "train.npz").write_bytes(b"")
    (stopped / "sparse" / "0").mkdir(parents=True)  # a `spirula run` project is a dataset too
    (stopped / "sparse" / "0" / "cameras.bin").write_bytes(b"")
    assert classify(stopped) == Drop("project", stopped)
    finished = tmp_path / "finished"
    finished.mkdir()
    (finished / "splat.ply").write_bytes(b"ply\n")
    (finished / "train.json").write_text("{}")
    assert classify(finished) == Drop("project", finished)
    run = tmp_path / "run"
    (run / "train").mkdir(parents=True)  # `spirula run`: the splats in train/
    (run / "train" / "splat.ply").write_bytes(b"ply\n")
    (run / "train" / "train.json").write_text("{}")
    assert classify(run).action == "project"


def test_the_overlay_says_what_a_drop_does(tiny_dataset, tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"")
    (tmp_path / "a.txt").write_text("x")
    assert describe_many(classify_many([tiny_dataset])) == "Review the dataset ring, then train it"
    assert describe_many(classify_many([tmp_path / "clip.mp4"])).startswith("Reconstruct the video clip.mp4")
    text = describe_many(classify_many([tmp_path / "a.txt", tmp_path / "clip.mp4"]))
    assert text.startswith("Reconstruct the video") and "first of 2" in text
    assert describe_many(classify_many([tmp_path / "a.txt"])).startswith("Cannot open: a.txt")
    assert describe_many([]) == "Only local files and folders can be opened"


def test_every_splat_format_is_viewed(tmp_path):
    for name in ("a.spz", "b.sog", "c.splat", "d.compressed.ply", "E.SPZ"):
        (tmp_path / name).write_bytes(b"x")
        assert classify(tmp_path / name) == Drop("splats", tmp_path / name), name
    sog = tmp_path / "unzipped sog"
    sog.mkdir()
    (sog / "meta.json").write_text("{}")
    assert classify(sog) == Drop("splats", sog)
    assert classify(sog / "meta.json") == Drop("splats", sog / "meta.json")
    (tmp_path / "notes.txt").write_text("hi")
    assert ".spz" in classify(tmp_path / "notes.txt").reason


def test_gltf_opens_as_splats_or_mesh_by_its_content(tmp_path):
    """A .glb / .gltf that uses KHR_gaussian_splatting is viewed as splats; a mesh .glb (the
    mesh stage's) as a mesh; a broken or mesh-only .gltf is refused with its reason."""
    import json

    import numpy as np
    import trimesh

    from spirula.engine.io.gltf import write_gltf
    from tests.io.splat_cases import random_gaussians

    g = random_gaussians(np.random.default_rng(7), 40, 1)
    for name in ("splats.glb", "splats.gltf"):
        write_gltf(tmp_path / name, g)
        assert classify(tmp_path / name) == Drop("splats", tmp_path / name), name
    mesh = trimesh.creation.box()
    mesh.export(tmp_path / "mesh.glb")
    assert classify(tmp_path / "mesh.glb") == Drop("mesh", tmp_path / "mesh.glb")
    (tmp_path / "mesh.gltf").write_text(json.dumps({"asset": {"version": "2.0"}, "extensionsUsed": ["KHR_lights"]}))
    d = classify(tmp_path / "mesh.gltf")
    assert d.action == "unsupported" and "without KHR_gaussian_splatting" in d.reason
    (tmp_path / "broken.glb").write_bytes(b"glTF\x02\x00\x00\x00" + b"\xff" * 30)
    assert classify(tmp_path / "broken.glb").action == "mesh"   # opening it names the problem


def test_a_2to1_video_is_a_360_drop(tmp_path):
    """A video of 2:1 frames is taken as 360 by the reconstruction: its drop says so (header
    only); another aspect, or a file PyAV cannot open, is an ordinary video drop."""
    import numpy as np

    from tests.ingest.videos import write_video

    pano = write_video(tmp_path / "pano.mp4", [np.full((64, 128, 3), 80 + 40 * i, np.uint8) for i in range(2)])
    flat = write_video(tmp_path / "flat.mp4", [np.full((96, 128, 3), 80 + 40 * i, np.uint8) for i in range(2)])
    (tmp_path / "broken.mp4").write_bytes(b"not a video")
    assert classify(pano) == Drop("video", pano, kind="360")
    assert classify(pano).describe().startswith("Reconstruct the 360-degree video pano.mp4")
    assert classify(flat) == Drop("video", flat) and classify(tmp_path / "broken.mp4").kind == ""
    assert describe_many(classify_many([pano])).startswith("Reconstruct the 360-degree video")
