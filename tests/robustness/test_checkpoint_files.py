"""Checkpoint files that are damaged or hostile (issue 49, item 2): every read error is one
CheckpointError line naming the file and what is wrong; NaN/Inf values and insane metadata
(a step of 10^9, shapes that disagree, another SH degree) are refused as corrupt; two
generations are kept and the previous one is used, with a warning naming both, when the
newest is bad; a crash in the middle of a write leaves both generations whole; `spirula
run --from train` trains afresh. No GPU: the checkpoints are written by hand (the format of
spirula/engine/checkpoint.py's module docstring) from seeded random arrays."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from spirula.engine import checkpoint
from spirula.engine.config import RunConfig, TrainConfig
from spirula.engine.errors import SpirulaError
from spirula.engine.jobs import stages, train
from spirula.engine.jobs.project_layout import checkpoint_path
from spirula.engine.jobs.pipeline import run_pipeline

SH = 1
D = 11 + 3 * (SH + 1) ** 2


def _arrays(step: int = 40, n: int = 50, seed: int = 0, steps: int = 100, **meta_over) -> dict:
    """The arrays of a valid checkpoint of ``n`` Gaussians at ``step`` of ``steps``."""
    rng = np.random.default_rng(seed)
    params = rng.normal(size=(n, D)).astype(np.float32)
    meta = {"version": checkpoint.VERSION, "step": step, "count": n, "adam_step": step, "logged_step": step,
            "rng": np.random.default_rng(seed).bit_generator.state, "order": [0, 2, 1],
            "history": [[step, 0.1]], "pipeline": {},
            "config": asdict(RunConfig(train=TrainConfig(steps=steps, sh_degree=SH))),
            "dataset": {"images": 4, "poses": "p", "intrinsics": "i", "train_idx": [0, 1, 2]}, "device": "test",
            "extra": {"evaluations": [], "train_seconds": 1.5}} | meta_over
    return {"params": params, "exp_avg": rng.normal(size=(n, D)).astype(np.float32),
            "exp_avg_sq": rng.random((n, D)).astype(np.float32), "grad2d_sum": rng.random(n).astype(np.float32),
            "vis_count": rng.random(n).astype(np.float32), "loss_sum": np.zeros(8, np.uint32),
            "meta": np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)}


def _write(path: Path, arrays: dict) -> Path:
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load(path)
    text = str(e.value)
    assert isinstance(e.value, SpirulaError) and "\n" not in text and str(path) in text, text
    for w in words:
        assert w in text, text
    return text


def test_a_valid_checkpoint_loads(tmp_path):
    ck = checkpoint.load(_write(tmp_path / "c.npz", _arrays()))
    assert ck.step == 40 and ck.state["model"]["params"].shape == (50, D) and ck.notes == []


def test_truncated_and_flipped_files_are_named_in_one_line(tmp_path):
    good = _write(tmp_path / "good.npz", _arrays()).read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(good[: len(good) // 2])  # the zip directory at the end is gone
    _refused(cut, "damaged", "truncated")
    rng = np.random.default_rng(1)
    for k in range(6):  # a few flipped bytes in the arrays' data, and in the archive's structure
        bad = bytearray(good)
        spots = rng.integers(200, len(good) - 200, 3) if k < 3 else rng.integers(len(good) - 150, len(good), 3)
        for i in spots:
            bad[i] ^= 0x5A
        p = tmp_path / f"flipped{k}.npz"
        p.write_bytes(bytes(bad))
        _refused(p, "damaged")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    _refused(empty)


def test_non_finite_values_are_refused(tmp_path):
    for name in ("params", "exp_avg", "vis_count"):
        a = _arrays()
        a[name] = a[name].copy()
        a[name].flat[7] = np.nan if name != "vis_count" else np.inf
        _refused(_write(tmp_path / f"{name}.npz", a), "NaN/Inf", name)


@pytest.mark.parametrize("over, words", [
    ({"step": 10 ** 9}, ("step 1000000000", "0..100")),
    ({"step": -1}, ("step -1",)),
    ({"logged_step": 60}, ("logged step 60",)),
    ({"adam_step": -3}, ("Adam step",)),
    ({"count": 49}, ("50 Gaussians", "49")),
    ({"step": "40"}, ("whole number",)),
    ({"rng": {"bit_generator": "PCG64", "state": "x"}}, ("random generator",)),
    ({"order": [0, -1]}, ("camera queue",)),
])
def test_insane_metadata_is_refused(tmp_path, over, words):
    _refused(_write(tmp_path / "c.npz", _arrays(**over)), "invalid checkpoint", *words)


def test_shapes_that_disagree_are_refused(tmp_path):
    a = _arrays()
    a["exp_avg"] = a["exp_avg"][:-1]
    _refused(_write(tmp_path / "rows.npz", a), "exp_avg")
    a = _arrays()
    a["vis_count"] = a["vis_count"][:10]
    _refused(_write(tmp_path / "vis.npz", a), "vis_count", "(50,)")
    a = _arrays()  # rows of SH degree 3 under settings of degree 1
    a["params"] = np.zeros((50, 11 + 48), np.float32)
    _refused(_write(tmp_path / "sh.npz", a), "SH degree 1")
    a = _arrays()
    a["params"] = a["params"].astype(np.float64)
    _refused(_write(tmp_path / "f64.npz", a), "float64")


def test_the_previous_generation_is_used_when_the_newest_is_bad(tmp_path):
    path = tmp_path / "train.npz"
    prev = checkpoint.previous_path(path)
    assert prev.name == "train.prev.npz"
    _write(prev, _arrays(step=20))
    good = _write(path, _arrays(step=40)).read_bytes()
    path.write_bytes(good[:1000])
    ck = checkpoint.load_newest(path)
    assert ck.step == 20 and ck.path == prev
    assert len(ck.notes) == 1 and str(path) in ck.notes[0] and str(prev) in ck.notes[0] and "\n" not in ck.notes[0]
    _write(path, _arrays(step=40, count=7))  # invalid, not unreadable: the same
    assert checkpoint.load_newest(path).step == 20
    path.unlink()  # a crash between the two renames of a copy-instead-of-link file system
    assert checkpoint.load_newest(path).step == 20
    prev.write_bytes(b"PK\x03\x04 not really")
    _write(path, _arrays(step=10 ** 9))
    with pytest.raises(checkpoint.CheckpointError) as e:
        checkpoint.load_newest(path)
    assert str(path) in str(e.value) and str(prev) in str(e.value) and "\n" not in str(e.value)


def test_resume_auto_warns_and_starts_over_on_a_damaged_checkpoint(tmp_path):
    path = _write(tmp_path / "checkpoint.npz", _arrays())
    path.write_bytes(path.read_bytes()[:-40])
    said = []
    assert train._load_checkpoint(path, "auto", said.append) is None
    assert len(said) == 1 and said[0].startswith("warning: ") and str(path) in said[0] and "starting over" in said[0]
    with pytest.raises(checkpoint.CheckpointError):
        train._load_checkpoint(path, "require", said.append)
    _write(checkpoint.previous_path(path), _arrays(step=30))
    said.clear()
    assert train._load_checkpoint(path, "require", said.append).step == 30
    assert len(said) == 1 and "previous checkpoint" in said[0]


def test_a_checkpoint_past_the_runs_steps_does_not_fit(tmp_path):
    ck = checkpoint.load(_write(tmp_path / "c.npz", _arrays(step=100, steps=100)))
    cfg = RunConfig(train=TrainConfig(steps=50, sh_degree=SH))
    blocking, _ = checkpoint.compare(ck, cfg, ck.dataset)
    assert any("past this run's 50 steps (--steps 100 or more continues it)" in b for b in blocking)


def test_two_generations_and_a_crash_mid_write(tmp_path, monkeypatch):
    path = tmp_path / "train.npz"
    prev = checkpoint.previous_path(path)
    _write(prev, _arrays(step=5))  # an earlier run's
    w = checkpoint.BackgroundWriter(path)  # a fresh run: its first write drops the earlier run's generation
    w.submit(10, _arrays(step=10))
    w.wait()
    assert checkpoint.load(path).step == 10 and not prev.exists()
    for step in (20, 30):
        w.submit(step, _arrays(step=step))
        w.wait()
    assert checkpoint.load(path).step == 30 and checkpoint.load(prev).step == 20

    real_savez = np.savez

    def dies_half_way(f, **arrays):  # the process dies with half the file written
        real_savez(f, **arrays)
        f.truncate(f.tell() // 2)
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", dies_half_way)
    w.submit(40, _arrays(step=40))
    with pytest.raises(KeyboardInterrupt):
        w.wait()
    monkeypatch.setattr(np, "savez", real_savez)
    assert checkpoint.load(path).step == 30 and checkpoint.load(prev).step == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.npz", "train.prev.npz"]

    real_replace = checkpoint.os.replace
    calls = []

    def dies_before_the_last_rename(src, dst):  # linked the newest to prev, killed before the rename
        calls.append(Path(dst).name)
        if Path(dst) == path:
            raise KeyboardInterrupt
        return real_replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", dies_before_the_last_rename)
    with pytest.raises(KeyboardInterrupt):
        checkpoint._write_atomic(path, _arrays(step=40), "rotate")
    monkeypatch.setattr(checkpoint.os, "replace", real_replace)
    assert calls == ["train.prev.npz", "train.npz"]
    assert checkpoint.load(path).step == 30 and checkpoint.load(prev).step == 30


def test_resumed_from_the_previous_generation_keeps_it(tmp_path):
    path = tmp_path / "train.npz"
    prev = checkpoint.previous_path(path)
    _write(prev, _arrays(step=20))
    path.write_bytes(b"garbage")
    ck = checkpoint.load_newest(path)
    w = checkpoint.BackgroundWriter(path)
    w.resumed(ck)
    assert w.saved_step == 20 and w.kept() == f"the last good checkpoint (step 20) is kept in {prev}"
    w.submit(30, _arrays(step=30))
    w.wait()  # the bad newest is replaced, the good previous one is not: it was never rotated over it
    assert checkpoint.load(path).step == 30 and checkpoint.load(prev).step == 20
    checkpoint.remove(path)
    assert not checkpoint.exists(path)


def test_run_from_train_trains_afresh(tmp_path, monkeypatch):
    """`spirula run --from train` (or from an earlier stage) sets the project's checkpoints
    aside and never resumes; a plain rerun resumes ("auto")."""
    src = tmp_path / "photos"
    src.mkdir()
    rng = np.random.default_rng(0)
    from PIL import Image

    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(src / f"p{i}.jpg")
    proj = tmp_path / "proj"
    seen = []

    def fake_training(dataset, out, cfg, *, resume, checkpoint_path, **kw):
        seen.append((resume, checkpoint.exists(checkpoint_path)))
        out.mkdir(parents=True, exist_ok=True)
        return {"step": 1}

    monkeypatch.setattr(train, "run_training", fake_training)
    for name in ("import", "sfm", "undistort", "export", "mesh"):
        def fake(ctx, name=name):
            for rel in stages.STAGE_OUTPUTS[name]:
                target = ctx.staging / rel.replace("*", "glb")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.mkdir() if "*" not in rel else target.write_text("x")
            return {}
        monkeypatch.setitem(stages.STAGE_FUNCTIONS, name, fake)
    run_pipeline(src, proj)
    assert seen == [("auto", False)]
    ckpt = stages.train_checkpoint_path(proj)
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    _write(ckpt, _arrays())
    _write(checkpoint.previous_path(ckpt), _arrays(step=20))
    for start in ("train", "sfm"):
        seen.clear()
        run_pipeline(src, proj, from_stage=start)
        assert seen == [("never", False)], start
        assert ckpt.with_name("train.replaced.npz").is_file()
        _write(ckpt, _arrays())
    seen.clear()
    run_pipeline(src, proj, from_stage="export")  # after the training: it stays cached
    assert seen == []


def test_the_studio_describes_a_project_whose_newest_checkpoint_is_damaged(tmp_path):
    from spirula.engine.studio.projects import describe_project

    proj = tmp_path / "proj"
    ckpt = stages.train_checkpoint_path(proj)
    ckpt.parent.mkdir(parents=True)
    studio = {"steps": 100, "dataset": str(tmp_path / "data")}
    _write(checkpoint.previous_path(ckpt), _arrays(step=20, extra={"studio": studio}))
    ckpt.write_bytes(_write(tmp_path / "x.npz", _arrays(extra={"studio": studio})).read_bytes()[:-100])
    info = describe_project(proj)
    assert info.step == 20 and "resume" in info.choices
    checkpoint.previous_path(ckpt).write_bytes(b"PK\x05\x06")
    with pytest.raises(checkpoint.CheckpointError) as e:  # a SpirulaError: the window refuses in one line
        describe_project(proj)
    assert str(checkpoint.previous_path(ckpt)) in str(e.value) and "\n" not in str(e.value)
    from spirula.engine.studio.projects import read_project

    with pytest.raises(checkpoint.CheckpointError) as e:  # Resume: the same line and the next step to take
        read_project(proj)
    assert str(e.value).endswith("; Restart trains the project afresh") and "\n" not in str(e.value), e.value


def _rewrite(path: Path, change) -> None:
    """Rewrite the checkpoint ``path`` with ``change(arrays, meta)`` applied (a hostile edit
    that keeps the archive itself valid)."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta"].tobytes())
    change(arrays, meta)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
    _write(path, arrays)


def test_cli_resume_past_damaged_and_hostile_checkpoints(tmp_path, capsys):
    """`spirula train --resume` end to end (software Vulkan, 5 steps at 48 px, checkpoints at 2 and 4): a damaged
    newest checkpoint resumes from the previous one with a warning; NaN values or a step
    of 10^9 in both generations are refused in one line naming the file, and the good PLY
    stays as it was."""
    from spirula.engine.cli.main import main

    from .fixtures import ring_dataset

    ring_dataset(tmp_path / "d", 4, points=30)
    out = tmp_path / "out"
    args = ["train", str(tmp_path / "d"), "-o", str(out), "--max-size", "48", "--eval-every", "0", "--sh-degree", "0",
            "--checkpoint-every", "2", "--steps", "5"]
    assert main(args) == 0
    newest = checkpoint_path(out)
    prev = checkpoint.previous_path(newest)
    assert checkpoint.load(newest).step == 5 and checkpoint.load(prev).step == 4  # 2, 4 and the end
    capsys.readouterr()
    newest.write_bytes(newest.read_bytes()[:-500])
    assert main(args + ["--resume"]) == 0
    text = "".join(capsys.readouterr())
    assert f"{newest}: damaged checkpoint" in text and f"using the previous checkpoint {prev} (step 4)" in text
    assert json.loads((out / "metrics.json").read_text())["resumed_from_step"] == 4
    assert checkpoint.load(newest).step == 5 and checkpoint.load(prev).step == 4  # the good one was kept
    ply = (out / "splat.ply").read_bytes()

    def nan(arrays, meta):
        arrays["params"][3, 0] = np.nan

    def far(arrays, meta):
        meta["step"] = meta["logged_step"] = 10 ** 9

    for change, words in ((nan, "1 NaN/Inf value in params"), (far, "step 1000000000 is outside 0..5")):
        for p in (newest, prev):
            _rewrite(p, change)
        assert main(args + ["--resume"]) == 1
        lines = [t for t in capsys.readouterr().err.replace("\r", "\n").splitlines() if "checkpoint" in t]
        assert len(lines) == 1, lines  # the progress bar aside
        err = lines[0]
        assert err.startswith("error: ") and words in err and str(newest) in err and "a bug" not in err, err
        # and the next step to take
        assert err.endswith("; rerun without --resume to train afresh (the checkpoint is then replaced)"), err
        assert (out / "splat.ply").read_bytes() == ply


def test_the_end_of_a_run_checkpoints_when_checkpoint_every_is_past_its_steps(tmp_path):
    """`--checkpoint-every 100 --steps 3`: no checkpoint came on the way, the end writes one
    (a finished run continues with more steps from it); --checkpoint-every 0 writes none.
    Before, neither wrote one."""
    from spirula.engine.cli.main import main

    from .fixtures import ring_dataset

    ring_dataset(tmp_path / "d", 4, points=30)
    base = ["train", str(tmp_path / "d"), "--max-size", "48", "--eval-every", "0", "--sh-degree", "0",
            "--steps", "3"]
    assert main(base + ["-o", str(tmp_path / "a"), "--checkpoint-every", "100"]) == 0
    assert checkpoint.load(checkpoint_path(tmp_path / "a")).step == 3
    assert main(base + ["-o", str(tmp_path / "b"), "--checkpoint-every", "0"]) == 0
    assert not checkpoint.exists(checkpoint_path(tmp_path / "b"))


def test_a_max_size_change_at_resume_is_one_warning(tmp_path, capsys):
    """`--resume` with another --max-size: one warning line says so (the image sizes and
    intrinsics change with it); before, a second line said "image sizes / intrinsics" again."""
    from spirula.engine.cli.main import main

    from .fixtures import ring_dataset

    ring_dataset(tmp_path / "d", 4, points=30)
    args = ["train", str(tmp_path / "d"), "-o", str(tmp_path / "p"), "--eval-every", "0", "--sh-degree", "0",
            "--checkpoint-every", "2"]
    assert main(args + ["--max-size", "48", "--steps", "2"]) == 0
    capsys.readouterr()
    assert main(args + ["--max-size", "40", "--steps", "4", "--resume"]) == 0
    text = "".join(capsys.readouterr()).replace("\r", "\n")
    changed = [t for t in text.splitlines() if "resuming with a changed setting" in t]
    assert len(changed) == 2, changed  # steps and max_size, each once
    size = [t for t in changed if "max_size" in t or "intrinsics" in t]
    assert len(size) == 1 and "max_size 48 -> 40" in size[0], changed
