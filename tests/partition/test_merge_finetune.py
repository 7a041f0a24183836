"""The merge's joint fine-tune (spirula/engine/partition/merge.py finetune): parts that disagree
across the cut are made to agree by a few steps over every training camera.

The parts here are made, not trained: a model of the small city trained once on all its
training cameras (the "whole"), and the two parts' files cut from it so that they disagree
the way independently trained parts do on an orbit capture: part 0 is the whole model,
part 1 is the whole model with its own side's Gaussians brighter (mouse's owned merge
showed colour offsets of opposite sign on the two sides of the cut). The owned merge then
shows the city's part-1 side off (about -1.2 dB over the held-out views, some of which see
only part 0's side); the fine-tune must win back at least half of that, on held-out views
it never trains on."""

import json

import numpy as np
import pytest

from spirula.engine.config import DatasetConfig, RunConfig, TrainConfig
from spirula.engine.io.ply import read_ply, write_ply
from spirula.engine.messages import Warning
from spirula.engine.partition import fits, merge
from spirula.engine.partition.parts_layout import read_layout
from spirula.engine.partition.parts import split_dataset
from spirula.engine.partition.split import SplitSettings
from tests.partition.city import make_city, write_city

SIZE, POINTS, STEPS = 40, 1500, 400


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from spirula.engine.jobs.train import run_training

    root = tmp_path_factory.mktemp("finetune")
    write_city(root / "city", make_city(blocks=2, width=SIZE, height=SIZE * 3 // 4), points=POINTS)
    split_dataset(root / "city", root / "parts", SplitSettings(parts=2, min_cameras=4, total_gaussians=POINTS,
                                                               max_size=SIZE), on_message=lambda _: None)
    cfg = RunConfig(dataset=DatasetConfig(max_size=SIZE, eval_every=8),
                    train=TrainConfig(steps=STEPS, strategy="mcmc", mcmc_budget=POINTS, max_gaussians=POINTS,
                                      checkpoint_every=0, mcmc_init_scale=1.0))
    whole = run_training(root / "city", root / "whole", cfg, on_message=lambda _: None)
    return root, cfg, whole


def _make_parts(root, cfg, part_steps=STEPS):
    """Write part_00 (the whole model) and part_01 (its own side faded) as trained parts."""
    layout = read_layout(root / "parts")
    g = read_ply(root / "whole" / "splat.ply")
    mine = layout.owner_of(g.means) == 1
    assert 0.2 < mine.mean() < 0.8, mine.mean()  # the cut goes through the model
    faded = read_ply(root / "whole" / "splat.ply")
    faded.sh0[mine] += 1.0  # brighter (+0.28 in RGB)
    part_cfg = RunConfig(device=cfg.device, dataset=cfg.dataset, train=TrainConfig(**{
        **cfg.to_dict()["train"], "background": cfg.train.background, "steps": part_steps}))
    for p, model in zip(layout.parts, (g, faded)):
        out = layout.part_dir(p) / "train"
        out.mkdir(parents=True, exist_ok=True)
        write_ply(out / "splat.ply", model)
        (out / "part.json").write_text(json.dumps({"done": True, "config": part_cfg.to_dict()}))
    return layout


def test_the_finetune_mends_parts_that_disagree_across_the_cut(made):
    root, cfg, whole = made
    layout = _make_parts(root, cfg)
    owned = merge.merge_parts(root / "parts", root / "owned", finetune_steps=0)
    assert owned["finetune_steps"] == 0 and not (root / "owned" / "finetune").exists()
    loss = whole["psnr"] - owned["psnr"]
    assert loss > 0.8, (owned["psnr"], whole["psnr"])  # the brighter side shows

    tuned = merge.merge_parts(root / "parts", root / "tuned", finetune_steps=100)
    assert tuned["finetune_steps"] == 100
    assert tuned["owned_psnr"] == pytest.approx(owned["psnr"], abs=1e-6)
    assert tuned["psnr"] > owned["psnr"] + 0.5 * loss, (tuned["psnr"], owned["psnr"], whole["psnr"])
    # the fine-tune trained on the whole scene's training cameras only: the held-out views stay
    # out, and only the merge scores them (the fine-tune's run does not score them again)
    ft = json.loads((root / "tuned" / "finetune" / "metrics.json").read_text())
    assert sorted(ft["held_out"]) == sorted(layout.test) and ft["psnr"] is None and ft["views"] is None
    g = read_ply(root / "tuned" / "splat.ply")
    assert len(g) == tuned["num_gaussians"] == owned["num_gaussians"]  # MCMC at the merged count: no growth


def _set_context_views(root, views: int) -> None:
    path = root / "parts" / "partition.json"
    d = json.loads(path.read_text())
    d["settings"]["context_views"] = views
    path.write_text(json.dumps(d))


def test_the_default_finetunes_a_share_of_the_parts_steps_when_it_fits(made, monkeypatch):
    root, cfg, _ = made
    _make_parts(root, cfg, part_steps=4000)
    calls = []
    monkeypatch.setattr(merge, "finetune",
                        lambda layout, out_dir, c: calls.append(c) or read_ply(out_dir / "splat.ply"))
    monkeypatch.setattr(fits, "device_budget", lambda dataset, c: None)  # fits
    # the city is no orbit: its parts trained without context, and auto leaves the owned merge
    assert not read_layout(root / "parts").settings.get("context_views")
    m = merge.merge_parts(root / "parts", root / "auto-city", evaluate_views=False)
    assert m["finetune_steps"] == 0 and not calls
    _set_context_views(root, 2)  # parts trained with an orbit's context: auto fine-tunes
    m = merge.merge_parts(root / "parts", root / "auto", evaluate_views=False)
    assert m["finetune_steps"] == 200 and calls[0].train.steps == 200  # 5 % of 4,000
    assert calls[0].train.mcmc_budget == m["num_gaussians"]

    _make_parts(root, cfg, part_steps=600)
    m = merge.merge_parts(root / "parts", root / "auto-short", evaluate_views=False)
    assert m["finetune_steps"] == 100  # at least 100

    said = []
    monkeypatch.setattr(fits, "device_budget", lambda dataset, c: (3 * 2**30, 2**30))  # does not fit
    m = merge.merge_parts(root / "parts", root / "auto-big", evaluate_views=False, emit=said.append)
    assert m["finetune_steps"] == 0 and len(calls) == 2
    assert any(isinstance(w, Warning) and "not fine-tuned" in w.text for w in said), said
