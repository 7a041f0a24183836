"""`spirula bench train` without --data trains on the embedded sample (the checkout's or the
installed package's), not on a path computed from the module's depth (it pointed inside
spirula/engine/ before)."""

from __future__ import annotations

import pytest

from spirula.engine.cli.bench import commands


class _Stop(Exception):
    pass


def test_bench_train_defaults_to_the_embedded_sample(monkeypatch):
    seen = []

    def fake_load(path, max_size=None):
        seen.append(path)
        raise _Stop

    monkeypatch.setattr("spirula.engine.ingest.load_dataset", fake_load)
    with pytest.raises(_Stop):
        commands.bench_train(gpu=None, steps=1)
    assert (seen[0] / "transforms.json").is_file(), seen
