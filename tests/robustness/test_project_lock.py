"""One writer per project (spirula/engine/jobs/lock.py; issue 49 item 3) and the temporary files of
killed writes (item 5): a second writer is refused in one line naming the owner; a lock
left by a dead process is taken over with a note; the leftovers of killed writes go when
the next job takes the project, and with `spirula clean`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from spirula.engine.cli.main import main

REPO = Path(__file__).resolve().parents[2]
HOLD = ("import sys; from spirula.engine.jobs.lock import acquire; acquire(sys.argv[1], 'spirula run'); "
        "print('locked', flush=True); sys.stdin.read()")


@pytest.fixture
def held(tmp_path):
    """The project folder, locked by another live process (released when the test ends)."""
    proj = tmp_path / "proj"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(proj)], cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert proc.stdout.readline().strip() == "locked"
    yield proj, proc
    proc.stdin.close()
    proc.wait(timeout=60)


def test_a_second_writer_is_refused_in_one_line_naming_the_owner(held):
    from spirula.engine.jobs.lock import ProjectBusyError, acquire

    proj, proc = held
    with pytest.raises(ProjectBusyError) as e:
        acquire(proj, "spirula mesh")
    text = str(e.value)
    assert "\n" not in text and str(proj) in text
    assert f"PID {proc.pid} on {socket.gethostname()} since 20" in text and "(spirula run)" in text


@pytest.mark.parametrize("argv", [
    ["train", "{data}", "-o", "{proj}"],
    ["run", "{data}", "-o", "{proj}"],
    ["mesh", "{proj}"],
    ["partition", "train", "{proj}"],
])
def test_every_writing_command_is_refused_while_another_writes(held, shared_data, capsys, argv):
    proj, proc = held
    (proj / "splat.ply").write_text("x")  # what the mesh would read: the lock, not the file, refuses it
    rc = main([a.format(data=shared_data / "book", proj=proj) for a in argv])
    err = [t for t in capsys.readouterr().err.splitlines() if t.strip() and "step/s" not in t]
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith(f"error: {proj} is being written by another spirula process (PID {proc.pid}"), err


def test_a_lock_left_by_a_dead_process_is_taken_over_with_a_note(tmp_path):
    from spirula.engine.jobs.lock import LOCK_FILE, acquire, owner

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / LOCK_FILE).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(),
                                              "started": "2026-12-07T10:00:00+0000", "command": "spirula run"}))
    notes = []
    lock = acquire(proj, "spirula train", on_note=notes.append)
    assert notes == [f"note: {proj} was locked by PID {dead.pid} on {socket.gethostname()} since "
                     f"2026-12-07T10:00:00+0000 (spirula run), which is no longer running; lock taken over"]
    assert owner(proj)["pid"] == os.getpid() and owner(proj)["command"] == "spirula train"
    lock.release()
    assert not (proj / LOCK_FILE).exists() and proj.is_dir()


def test_the_lock_is_reentrant_in_a_process_and_leaves_no_folder_it_made(tmp_path):
    from spirula.engine.jobs.lock import LOCK_FILE, acquire

    proj = tmp_path / "new" / "proj"
    a = acquire(proj, "studio")
    b = acquire(proj, "pipeline")  # the studio holds its project and runs a job in the same process
    b.release()
    assert (proj / LOCK_FILE).is_file()
    a.release()
    a.release()  # twice: nothing more
    assert not proj.exists()  # made for the lock, nothing written: gone again


def test_a_killed_writers_temporaries_go_with_the_next_job_and_with_clean(tmp_path, capsys):
    """What a SIGKILL mid-write leaves (open_atomic's .NAME.XXXXXXXX.tmp, a stage's
    .staging/) is removed when the next job takes the project, and by `spirula clean`;
    results are untouched."""
    from spirula.engine.jobs.lock import acquire

    proj = tmp_path / "proj"
    (proj / "checkpoints").mkdir(parents=True)
    (proj / "exports").mkdir()
    results = {proj / "checkpoints" / "train.npz": b"ckpt", proj / "exports" / "splat.ply": b"ply",
               proj / "run.json": b"{}"}
    for p, data in results.items():
        p.write_bytes(data)

    def leave_leftovers():
        (proj / "checkpoints" / ".train.npz.k3j_x9a1.tmp").write_bytes(b"\0" * 4096)
        (proj / ".run.json.abcdefgh.tmp").write_bytes(b"{")
        (proj / ".staging" / "mesh").mkdir(parents=True, exist_ok=True)
        (proj / ".staging" / "mesh" / "mesh.json").write_text("{}")

    leave_leftovers()
    notes = []
    acquire(proj, "spirula run", on_note=notes.append).release()
    assert notes == [f"note: removed 3 leftover temporary file(s) of interrupted writes from {proj} (0.0 MiB)"]
    assert sorted(p.relative_to(proj).as_posix() for p in proj.rglob("*")) == [
        "checkpoints", "checkpoints/train.npz", "exports", "exports/splat.ply", "run.json"]

    leave_leftovers()
    assert main(["clean", str(proj)]) == 0
    out = capsys.readouterr().out
    assert "removed 3 leftover temporary file(s)" in out
    assert not list(proj.rglob("*.tmp")) and not (proj / ".staging").exists()
    assert all(p.read_bytes() == data for p, data in results.items())


def test_clean_leaves_the_temporaries_of_a_running_writer(held, capsys):
    proj, proc = held
    tmp = proj / ".splat.ply.abcdefgh.tmp"  # being written right now
    tmp.write_bytes(b"...")
    assert main(["clean", str(proj)]) == 0
    assert tmp.exists() and "temporary files left" in capsys.readouterr().out


def test_spirula_train_takes_the_lock_before_it_writes(tmp_path, monkeypatch):
    import spirula.engine.jobs.train
    from spirula.engine.jobs.lock import owner

    seen = {}
    out = tmp_path / "out"
    out.mkdir()
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / ".train.npz.zz9_k2m1.tmp").write_bytes(b"half a checkpoint")

    def run_training(dataset, out_dir, cfg, **kw):
        seen["owner"] = owner(out_dir)
        seen["leftover"] = (out_dir / "checkpoints" / ".train.npz.zz9_k2m1.tmp").exists()
        return {"stopped_early": False}

    monkeypatch.setattr(spirula.engine.jobs.train, "run_training", run_training)
    assert main(["train", str(tmp_path), "-o", str(out)]) == 0
    assert seen["owner"]["pid"] == os.getpid() and seen["owner"]["command"] == "spirula train"
    assert seen["leftover"] is False
    assert owner(out) is None  # released


def test_the_sweep_touches_only_this_projects_temporaries(tmp_path):
    """Files that are not our writers' temporaries stay, wherever they are; ours deeper than
    any job writes are left too (the sweep does not walk a whole disk when -o is a big folder)."""
    from spirula.engine.fileio import remove_temporaries

    proj = tmp_path / "proj"
    keep = [proj / ".editor.tmp", proj / "notes.tmp", proj / "train" / "a.png.tmp",
            proj / "a" / "b" / "c" / "d" / "e" / ".deep.abcdefgh.tmp"]
    gone = [proj / "train" / "eval" / "view.render.png.tmp",
            proj / "parts" / "part_000" / "train" / ".x.ply.ab_12xyz.tmp",
            proj / "checkpoints" / ".train.prev.npz.4242.140031234567.tmp"]  # the previous generation's link
    for p in keep + gone:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"12345")
    assert remove_temporaries(proj) == (3, 15)
    assert all(p.exists() for p in keep) and not any(p.exists() for p in gone)
