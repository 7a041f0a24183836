"""`spirula run --partition auto`: a model that does not fit the device (the VRAM limit of
the testing aid) is trained in parts and merged; one that fits trains as usual."""

import gc
import json

from spirula.engine.cli.main import main
from spirula.engine.device import get_gpu
from spirula.engine.io.ply import read_ply
from spirula.engine.partition import run_parts
from spirula.engine.partition.parts_layout import read_layout
from tests.partition.city import make_city, write_city

ARGS = ["--steps", "200", "--max-size", "32", "--strategy", "mcmc", "--max-gaussians", "12000",
        "--checkpoint-every", "0", "--eval-every", "8", "--no-mesh"]  # the mesh of a partitioned run: not this test


def test_run_partitions_only_what_does_not_fit(tmp_path, monkeypatch):
    data = tmp_path / "city"
    write_city(data, make_city(blocks=2, width=32, height=24), points=1200)
    monkeypatch.setattr(run_parts, "_import_ray", lambda: None)  # in-process: the Ray path has its own test
    gpu = get_gpu()
    old = gpu.vram_limit
    try:
        gc.collect()  # earlier tests' garbage would free its buffers in the middle of the run
        live = gpu.pool.live_bytes()  # what earlier tests' objects still hold on the shared device
        gpu.vram_limit = live + (8 << 20)  # the estimate (12,000 Gaussians x ~900 bytes + images) needs ~11 MiB
        assert main(["run", str(data), "-o", str(tmp_path / "big"), "--partition", "auto", *ARGS]) == 0
        gpu.vram_limit = gpu.pool.live_bytes() + (64 << 20)
        assert main(["run", str(data), "-o", str(tmp_path / "fits"), "--partition", "auto", *ARGS]) == 0
    finally:
        gpu.vram_limit = old
    big = json.loads((tmp_path / "big" / "run.json").read_text())
    layout = read_layout(tmp_path / "big" / "parts")
    budget = layout.settings["vram_gib"] * 2**30  # 0.8 x what was free of the limit when the run began
    assert budget <= 0.8 * (8 << 20) * 1.01
    assert len(layout.parts) >= 2 and all(p.vram_bytes <= budget for p in layout.parts)
    assert read_ply(tmp_path / "big" / "exports" / "splat.ply").means.shape[0] > 0
    assert "partitioned" in json.dumps(big)
    assert not (tmp_path / "fits" / "parts").exists()
    assert "partitioned" not in (tmp_path / "fits" / "run.json").read_text()
