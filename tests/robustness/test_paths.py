"""Input class 7, paths: non-ASCII characters and spaces in every folder and file name a
reader or writer touches; a read-only output folder refused with a clear error before
any work starts (the CLI entry points call spirula.engine.fileio.check_writable first)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from spirula.engine.errors import OutputError
from spirula.engine.fileio import check_writable
from spirula.engine.ingest import load_dataset
from spirula.engine.ingest.photos import PhotosConfig, import_photos
from spirula.engine.ingest.video import iter_frames, probe
from spirula.engine.io.ply import GaussianPly, read_ply, write_ply

from ..ingest.synth import random_pose
from ..ingest.videos import textured, write_video
from .fixtures import colmap_binary, colmap_text, save_png, write_files

ODD = "données 3D/scène é 日本 🙂"


def test_colmap_and_transforms_datasets_under_odd_names(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / ODD / "colmap set"
    names = ["sous dossier/photo 1 é.png", "фото 2.png", "写真 3.png"]
    ims = [(i + 1, random_pose(rng), 1, n, 0) for i, n in enumerate(names)]
    cams = [(1, "OPENCV", 40, 30, [40.0, 41.0, 20.0, 15.0, 0.01, 0.0, 0.0, 0.0])]
    for kind, writer in (("bin", colmap_binary), ("txt", colmap_text)):
        model = root / "sparse" / "0"
        for p in model.glob("*"):
            p.unlink()
        write_files(model, writer(cams, ims, rng.normal(size=(3, 3)), np.zeros((3, 3), int)))
        for n in names:
            save_png(root / "images" / n, rng.integers(0, 256, (30, 40, 3), dtype=np.uint8))
        ds = load_dataset(root, max_size=None)
        assert sorted(c.name for c in ds.cameras) == sorted(names), kind
        assert ds.warnings == []

    tjson = tmp_path / ODD / "nerf set"
    save_png(tjson / "images dir" / "ça va.png", rng.integers(0, 256, (30, 40, 3), dtype=np.uint8))
    import json

    (tjson / "transforms.json").write_text(json.dumps(
        {"fl_x": 30.0, "frames": [{"file_path": "images dir/ça va.png", "transform_matrix": np.eye(4).tolist()}]},
        ensure_ascii=False), encoding="utf-8")
    assert [c.name for c in load_dataset(tjson, max_size=None).cameras] == ["ça va.png"]


def test_ply_video_and_photos_under_odd_names(tmp_path):
    rng = np.random.default_rng(1)
    g = GaussianPly(means=rng.normal(size=(4, 3)).astype(np.float32), scales=np.zeros((4, 3), np.float32),
                    quats=np.tile(np.float32([1, 0, 0, 0]), (4, 1)), opacities=np.zeros(4, np.float32),
                    sh0=np.zeros((4, 3), np.float32), shN=np.zeros((4, 0, 3), np.float32))
    out = tmp_path / ODD / "exports ü"
    out.mkdir(parents=True)
    write_ply(out / "splat 1 é.ply", g)
    np.testing.assert_array_equal(read_ply(out / "splat 1 é.ply").means, g.means)

    video = write_video(tmp_path / ODD / "vidéo 1 日本.mp4", [textured(32, 48, s) for s in range(4)])
    info = probe(video)
    assert len(list(iter_frames(video, info))) == 4

    photos = tmp_path / ODD / "Fotos März"
    for i in range(2):
        save_png(photos / f"IMG {i} ü.png", rng.integers(0, 256, (20, 30, 3), dtype=np.uint8))
    recs = import_photos(photos, tmp_path / ODD / "projekt ø" / "frames", PhotosConfig())
    assert [r["name"] for r in recs] == ["IMG_0_ü.jpg", "IMG_1_ü.jpg"]
    assert all((tmp_path / ODD / "projekt ø" / "frames" / r["name"]).is_file() for r in recs)


# ------------------------------------------------------------------------ read-only output


@pytest.fixture
def read_only(tmp_path) -> Path:
    """A folder this process cannot write to: chmod 555, or, for root (which ignores the
    mode bits), the read-only /sys when this system has one."""
    d = tmp_path / "read only é"
    d.mkdir()
    d.chmod(0o555)
    try:
        probe = d / "probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError:
        yield d
    else:
        sys_dir = Path("/sys/kernel")
        if not sys_dir.is_dir() or _can_create_in(sys_dir):
            pytest.skip("no folder this process cannot write to (root, and no read-only /sys)")
        yield sys_dir
    finally:
        d.chmod(0o755)


def _can_create_in(folder: Path) -> bool:
    import tempfile

    try:
        fd, name = tempfile.mkstemp(dir=folder)
    except OSError:
        return False
    os.close(fd)
    os.unlink(name)
    return True


def test_check_writable_messages(tmp_path, read_only):
    with pytest.raises(OutputError) as e:
        check_writable(read_only)
    assert str(e.value) == f"the output folder {read_only} is not writable: Permission denied"
    with pytest.raises(OutputError) as e:
        check_writable(read_only / "project" / "sub", "project folder")
    assert str(e.value).startswith(f"cannot create the project folder {read_only / 'project' / 'sub'}: "
                                   f"{read_only} is not writable (")
    assert not (read_only / "project").exists()
    f = tmp_path / "a file"
    f.write_bytes(b"")
    with pytest.raises(OutputError) as e:
        check_writable(f)
    assert str(e.value) == f"the output folder {f} is a file, not a folder"
    ok = tmp_path / ODD / "new project"
    assert check_writable(ok) == ok and not ok.exists()  # checked, not created


@pytest.mark.parametrize("command", ["run", "train"])
def test_cli_refuses_a_read_only_output_before_any_work(tmp_path, read_only, capsys, monkeypatch, command):
    """`spirula run` / `spirula train` into a read-only folder: exit code 1 and one clear
    line, before the input is even looked at (the input here does not exist at all)."""
    from spirula.engine.cli import main as cli

    touched = []
    import spirula.engine.ingest.load as load_mod

    monkeypatch.setattr(load_mod, "read_scene", lambda *a, **k: touched.append(a))
    code = cli.main([command, str(tmp_path / "no such input"), "-o", str(read_only / "out")])
    err = capsys.readouterr().err
    assert code == 1 and touched == []
    what = "project folder" if command == "run" else "output folder"
    assert err.startswith(f"error: cannot create the {what} {read_only / 'out'}: {read_only} is not writable (")
