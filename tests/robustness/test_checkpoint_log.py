"""The log line about a checkpoint ("checkpoint: step N -> PATH") comes once the file is on
disk, not when its write starts (issue 49 item 5; on dfa6aa5 it came at once, while the
background writer had not written a byte)."""

from __future__ import annotations

import threading

from spirula.engine import checkpoint
from spirula.engine.jobs.project_layout import checkpoint_path


def test_the_checkpoint_line_comes_after_the_file_is_on_disk(shared_data, tmp_path, monkeypatch):
    from spirula.engine.jobs.train import run_training
    from tests.robustness.train_small import small_config

    said = threading.Event()
    order = []
    real = checkpoint._write_atomic

    def slow_write(path, arrays, *rest):
        # a slow disk: the write ends only once the line is out, or after a generous wait
        # (a correct job never says it first, so it waits the whole time, once)
        said.wait(timeout=10)
        real(path, arrays, *rest)
        order.append(("on disk", int(checkpoint.load(path).step)))

    def on_message(text: str) -> None:
        if text.startswith("checkpoint: "):
            order.append(("said", text))
            said.set()

    monkeypatch.setattr(checkpoint, "_write_atomic", slow_write)
    ckpt = checkpoint_path(tmp_path / "out")
    m = run_training(shared_data / "book", tmp_path / "out", small_config(steps=40, checkpoint_every=20),
                     on_message=on_message)
    assert m["step"] == 40
    assert order == [("on disk", 20), ("said", f"checkpoint: step 20 -> {ckpt}"),
                     ("on disk", 40), ("said", f"checkpoint: step 40 -> {ckpt}")]  # the end's too
