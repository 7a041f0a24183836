"""A write the file system refuses (no space, read-only, no permission) is one line naming
what was written and where, not "failed unexpectedly ... (a bug)" (issue 49 item 4). The
tests run as root, where chmod does not stop a write: the refusals are simulated by
monkeypatched os functions raising the OSError the kernel would."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from spirula.engine import checkpoint, fileio
from spirula.engine.cli.main import main
from spirula.engine.errors import SpirulaError


def _refuse(code: int, filename=None):
    def fail(*a, **kw):
        raise OSError(code, os.strerror(code), *([filename] if filename else []))
    return fail


def test_a_full_disk_while_writing_a_checkpoint_is_one_line_naming_it(tmp_path, monkeypatch):
    from spirula.engine.errors import WriteError

    path = tmp_path / "checkpoint.npz"
    path.write_bytes(b"the previous checkpoint")
    monkeypatch.setattr(fileio.os, "fsync", _refuse(errno.ENOSPC))  # the data does not fit: write-back fails
    with pytest.raises(WriteError) as e:
        checkpoint._write_atomic(path, {"a": np.arange(4, dtype=np.float32)})
    assert str(e.value) == f"cannot write checkpoint {path}: no space left on device"
    assert isinstance(e.value, OSError) and e.value.errno == errno.ENOSPC  # what tolerant callers catch
    assert path.read_bytes() == b"the previous checkpoint"  # untouched
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]  # no temporary left


def test_a_read_only_folder_is_one_line_naming_the_file(tmp_path, monkeypatch):
    from spirula.engine.errors import WriteError

    monkeypatch.setattr(fileio.tempfile, "mkstemp", _refuse(errno.EROFS, str(tmp_path)))
    with pytest.raises(WriteError, match=f"cannot write {tmp_path / 'metrics.json'}: read-only file system"):
        fileio.write_json_atomic(tmp_path / "metrics.json", {"a": 1})


def test_an_os_error_about_another_file_is_not_taken_for_the_write(tmp_path):
    from spirula.engine.errors import WriteError

    with pytest.raises(OSError) as e:
        with fileio.open_atomic(tmp_path / "out.txt", "w") as f:
            f.write("x")
            raise PermissionError(errno.EACCES, "Permission denied", "/some/input.jpg")
    assert not isinstance(e.value, WriteError) and e.value.filename == "/some/input.jpg"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_checkpoint_write_is_a_warning_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio.os, "fsync", _refuse(errno.ENOSPC))
    w = checkpoint.BackgroundWriter(tmp_path / "c.npz")
    w.submit(10, {"a": np.zeros(3, np.float32)})
    warning = w.flush()
    assert warning == f"checkpoint not written to {tmp_path / 'c.npz'}: No space left on device"
    assert w.saved_step is None


@pytest.mark.parametrize("error, line", [
    (OSError(errno.ENOSPC, "No space left on device"),
     "error: spirula train could not write its outputs: no space left on device"),
    (OSError(errno.EROFS, "Read-only file system", "/p/out/eval/a.png"),
     "error: cannot write /p/out/eval/a.png: read-only file system"),
    (PermissionError(errno.EACCES, "Permission denied", "/p/out/train.json"),
     "error: cannot access /p/out/train.json: permission denied"),
    (OSError(errno.EROFS, "Read-only file system", "/p/out/.splat.ply.k2_8abcd.tmp"),  # a writer's temporary
     "error: cannot write /p/out/splat.ply: read-only file system"),
])
def test_the_command_line_says_what_the_os_refused_not_a_bug(tmp_path, monkeypatch, capsys, error, line):
    import spirula.engine.jobs.train

    def run_training(*a, **kw):
        raise error

    monkeypatch.setattr(spirula.engine.jobs.train, "run_training", run_training)
    assert main(["train", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    err = [t for t in capsys.readouterr().err.splitlines() if t.strip() and "step/s" not in t]  # the progress bar aside
    assert len(err) == 1 and err[0].startswith(line), err
    assert "a bug" not in err[0] and "unexpectedly" not in err[0]


def test_a_real_bug_is_still_called_one(tmp_path, monkeypatch, capsys):
    import spirula.engine.jobs.train

    def run_training(*a, **kw):
        raise OSError(errno.EBADF, "Bad file descriptor")  # not the disk's refusal: ours

    monkeypatch.setattr(spirula.engine.jobs.train, "run_training", run_training)
    assert main(["train", str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    assert "failed unexpectedly: OSError" in capsys.readouterr().err


def test_a_pipeline_stage_on_a_full_disk_names_the_stage_and_the_file(tmp_path, monkeypatch):
    """A stage's own OSError without a file name (shutil.copyfile on a full disk) becomes
    WriteError naming the stage; run.json records the same line."""
    from PIL import Image

    from spirula.engine.errors import WriteError
    from spirula.engine.jobs import stages
    from spirula.engine.jobs.pipeline import PipelineConfig, run_pipeline

    src = tmp_path / "photos"
    src.mkdir()
    rng = np.random.default_rng(0)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(src / f"p{i}.jpg")
    monkeypatch.setitem(stages.STAGE_FUNCTIONS, "import", _refuse(errno.ENOSPC))
    proj = tmp_path / "proj"
    with pytest.raises(WriteError) as e:
        run_pipeline(src, proj, PipelineConfig(with_mesh=False))
    assert str(e.value) == (f"cannot write the import stage's output {proj / '.staging' / 'import'}: "
                            "no space left on device")
    assert isinstance(e.value, SpirulaError)
    assert json.loads((proj / "run.json").read_text())["error"]["message"] == str(e.value)
