"""Ctrl-C and SIGTERM stop every command in order (issue 49 item 1; spirula/engine/cli/stopping.py):
the training stops between two steps and checkpoints that step, the pipeline starts no
later stage, the command prints one line saying where it stopped and exits 130 (SIGINT) or
143 (SIGTERM), without a traceback or a C++ stack; the rerun continues from that step.

Real subprocesses on book at 64 px (software Vulkan); each signal is sent once the output
shows training steps done (polled, generous timeouts). On dfa6aa5 `spirula run` went on
into the export on Ctrl-C without a checkpoint of the step, and SIGTERM killed `spirula
train` with no checkpoint and no line (exit -15)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from spirula.engine import checkpoint
from spirula.engine.jobs.project_layout import checkpoint_path

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600  # generous: software Vulkan on a shared machine


class Command:
    """A `spirula` subprocess whose merged output is read line by line (tqdm's \\r updates
    count as lines) on a thread, so the test can wait for a pattern."""

    def __init__(self, *argv: str, script: str | None = None):
        env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
        env.pop("SPIRULA_PROFILE", None)
        cmd = [sys.executable, "-c", script, *argv] if script else [sys.executable, "-m", "spirula.engine.cli", *argv]
        self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: list[str] = []
        self.seen = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.seen:
                self.lines.append(line.rstrip("\n"))
                self.seen.notify_all()
        with self.seen:
            self.seen.notify_all()

    def wait_for(self, pattern: str) -> re.Match:
        """The first output line matching ``pattern`` (waits for it; fails when the output
        ends without one or after TIMEOUT_S)."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + TIMEOUT_S
        with self.seen:
            while True:
                for line in self.lines:
                    m = rx.search(line)
                    if m:
                        return m
                assert self.reader.is_alive(), f"ended before {pattern!r}:\n" + "\n".join(self.lines)
                assert time.monotonic() < deadline, f"no {pattern!r} within {TIMEOUT_S} s:\n" + "\n".join(self.lines)
                self.seen.wait(timeout=1.0)

    def finish(self) -> tuple[int, str]:
        """(exit code, the whole output) once the process has ended."""
        rc = self.proc.wait(timeout=TIMEOUT_S)
        self.reader.join(timeout=60)
        return rc, "\n".join(self.lines)


def _stop_lines(text: str) -> list[str]:
    return [t for t in text.splitlines() if t.startswith("stopped")]


def _clean_exit(text: str) -> None:
    assert "Traceback" not in text and "KeyboardInterrupt" not in text, text
    assert not re.search(r"(?m)^\s*#\d+ |Stack trace|stack trace|Aborted", text), text  # no C++ stack


def _train_args(steps: int, every: int) -> list[str]:
    return ["--max-size", "64", "--eval-every", "0", "--sh-degree", "1", "--steps", str(steps),
            "--checkpoint-every", str(every)]


def test_spirula_run_stops_at_the_step_on_ctrl_c_and_the_rerun_continues(shared_data, tmp_path):
    proj = tmp_path / "proj"
    argv = ["run", str(shared_data / "book"), "-o", str(proj), "--no-mesh",
            *_train_args(600, 500)]
    c = Command(*argv)
    c.wait_for(r"\b[1-9]\d*/600\b")  # the bar shows steps done
    c.proc.send_signal(signal.SIGINT)
    rc, text = c.finish()
    _clean_exit(text)
    assert rc == 130, text
    stops = _stop_lines(text)
    ckpt = proj / "checkpoints" / "train.npz"
    assert len(stops) == 1, text
    m = re.fullmatch(rf"stopped at step (\d+) of the training \(Ctrl-C\); checkpoint written to "
                     rf"{re.escape(str(ckpt))}; rerun the same command to continue", stops[0])
    assert m, stops
    step = int(m.group(1))
    assert 0 < step < 600 and checkpoint.load(ckpt).step == step
    assert not (proj / "exports").exists()  # no later stage started
    rec = json.loads((proj / "run.json").read_text())
    assert [(s["name"], s["status"]) for s in rec["stages"]] == [("train", "partial")]
    assert rec["stages"][0]["summary"]["step"] == step
    assert not (proj / ".spirula.lock").exists()

    again = Command(*argv)  # the same command
    rc, text = again.finish()
    assert rc == 0, text
    assert f"resumed from {ckpt} at step {step}" in text
    rec = json.loads((proj / "run.json").read_text())
    assert [(s["name"], s["status"]) for s in rec["stages"]] == [("train", "done"), ("export", "done")]
    assert rec["stages"][0]["summary"]["step"] == 600
    assert (proj / "exports" / "splat.ply").is_file() and not ckpt.exists()


def test_spirula_train_stops_in_order_on_sigterm(shared_data, tmp_path):
    out = tmp_path / "out"
    argv = ["train", str(shared_data / "book"), "-o", str(out), *_train_args(5000, 4000)]
    c = Command(*argv)
    c.wait_for(r"\b[1-9]\d*/5000\b")
    c.proc.send_signal(signal.SIGTERM)
    rc, text = c.finish()
    _clean_exit(text)
    assert rc == 143, text
    stops = _stop_lines(text)
    ckpt = checkpoint_path(out)
    assert len(stops) == 1, text
    m = re.fullmatch(rf"stopped at step (\d+) \(SIGTERM\); checkpoint written to {re.escape(str(ckpt))}; the model "
                     rf"so far is in {re.escape(str(out / 'splat.ply'))}; rerun the same command with --resume to "
                     r"continue", stops[0])
    assert m, stops
    step = int(m.group(1))
    assert 0 < step < 4000 and checkpoint.load(ckpt).step == step
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["stopped_early"] and metrics["step"] == step
    # the checkpoint's line came once the file was on disk, before the stop's line
    said = [i for i, t in enumerate(text.splitlines()) if t.startswith(f"checkpoint: step {step} -> {ckpt}")]
    assert said and said[0] < text.splitlines().index(stops[0])

    rc, text = Command(*argv[:-4], "--steps", str(step + 30), "--checkpoint-every", "4000", "--resume").finish()
    assert rc == 0, text
    assert json.loads((out / "metrics.json").read_text())["resumed_from_step"] == step


# the mesh and partition commands, with their work replaced by a loop that asks should_stop
# at each "step" (their real work stops the same way: run_mesh raises KeyboardInterrupt,
# train_parts returns stopped): the signal arrives while the loop runs
FAKE = r"""
import os, signal, sys, time
from pathlib import Path
import spirula.engine.jobs.mesh, spirula.engine.partition.run_parts
from spirula.engine.cli.main import main

def work(should_stop):
    print("working", flush=True)
    deadline = time.monotonic() + 600
    while not should_stop():
        assert time.monotonic() < deadline
        time.sleep(0.01)

def run_mesh(project, cfg, emit=None, should_stop=None, **kw):
    work(should_stop)
    raise KeyboardInterrupt("mesh: cancelled at tsdf")

def train_parts(parts, cfg, should_stop=None, **kw):
    work(should_stop)
    return {"parts": {}, "stopped": True}

spirula.engine.jobs.mesh.run_mesh = run_mesh
spirula.engine.partition.run_parts.train_parts = train_parts
sys.exit(main(sys.argv[1:]))
"""


def test_mesh_and_partition_train_stop_in_one_line_with_the_signals_code(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    for argv, sig, code, line in [
        (["mesh", str(proj)], signal.SIGTERM, 143,
         r"stopped in the mesh at tsdf \(SIGTERM\); no mesh file was written .*; rerun the same command to make it"),
        (["partition", "train", str(proj)], signal.SIGINT, 130,
         r"stopped \(Ctrl-C\): each unfinished part checkpointed the step it reached; rerun the same command to "
         r"continue them"),
    ]:
        c = Command(*argv, script=FAKE)
        c.wait_for(r"^working$")
        c.proc.send_signal(sig)
        rc, text = c.finish()
        _clean_exit(text)
        assert rc == code, text
        stops = _stop_lines(text)
        assert len(stops) == 1 and re.fullmatch(line, stops[0]), text
        assert not (proj / ".spirula.lock").exists()


def test_the_stop_request_asks_between_steps_and_interrupts_elsewhere():
    """The handler's rules without a real signal: inside between_steps the first signal only
    asks (and a Ctrl-C is acknowledged in one line), the second interrupts; outside, the
    first interrupts; the exit code follows the first signal."""
    import pytest

    from spirula.engine.cli.stopping import StopRequest

    said = []
    stop = StopRequest()
    with stop.between_steps(said.append):
        stop._handler(signal.SIGTERM, None)
        assert stop() and stop.exit_code == 143 and stop.name == "SIGTERM" and said == []
        with pytest.raises(KeyboardInterrupt):
            stop._handler(signal.SIGINT, None)
    assert stop.exit_code == 143  # the first signal's

    stop = StopRequest()
    with stop.between_steps(said.append):
        stop._handler(signal.SIGINT, None)
    assert said == ["stopping after this step (Ctrl-C again to interrupt at once)"] and stop.exit_code == 130
    stop = StopRequest()
    with pytest.raises(KeyboardInterrupt):
        stop._handler(signal.SIGTERM, None)  # outside a stepped job: at once
    assert stop.exit_code == 143


def test_spirula_runs_stop_line_names_the_stage_or_the_step():
    from spirula.engine.cli.run_command import stopped_line
    from spirula.engine.cli.stopping import StopRequest
    from spirula.engine.jobs.pipeline import PipelineStopped

    stop = StopRequest()
    stop.signum = signal.SIGTERM
    again = "rerun the same command to continue"
    assert stopped_line(stop, PipelineStopped("sfm")) == (
        f"stopped in the sfm stage (SIGTERM); the stages finished before are kept; {again}")
    assert stopped_line(stop, PipelineStopped("undistort", {"images": 7})) == (
        f"stopped after the undistort stage (SIGTERM); {again}")
    train = {"step": 70, "checkpoint": "/p/checkpoints/train.npz"}
    assert stopped_line(stop, PipelineStopped("train", {**train, "checkpoint_step": 70})) == (
        f"stopped at step 70 of the training (SIGTERM); checkpoint written to /p/checkpoints/train.npz; {again}")
    assert stopped_line(stop, PipelineStopped("train", {**train, "checkpoint_step": 50})) == (
        "stopped at step 70 of the training (SIGTERM); this step was not checkpointed, the last checkpoint (step 50) "
        f"is /p/checkpoints/train.npz; {again}")
    assert stopped_line(stop, PipelineStopped("train", {"step": 70, "checkpoint": None})) == (
        "stopped at step 70 of the training (SIGTERM); no checkpoint was written (--checkpoint-every 0, or the write "
        f"failed: see above); {again} (the training starts over)")


def test_the_signals_are_taken_back_from_a_native_library():
    """A library that sets its own SIGTERM handler in C after ours (pycolmap's glog dumps a
    stack and ends the process: `spirula run` after its SfM stage) does not keep it: the next
    step's should_stop() takes the signal back, and SIGTERM becomes a stop request."""
    import ctypes
    import os
    import signal

    from spirula.engine.cli.stopping import handle_signals

    libc = ctypes.CDLL(None)
    with handle_signals() as stop:
        with stop.between_steps():
            libc.signal(signal.SIGTERM, ctypes.c_void_p(1))  # SIG_IGN, set behind Python's back
            assert not stop()                                 # a step boundary: ours again
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):                              # the handler runs between bytecodes
                if stop():
                    break
            assert stop() and stop.signum == signal.SIGTERM and stop.exit_code == 143
