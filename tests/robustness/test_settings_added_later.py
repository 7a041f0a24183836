"""Settings added after runs were first saved (spirula.engine.config.added_later): a checkpoint or
a cached stage written before such a setting existed had its default."""

from dataclasses import asdict
from pathlib import Path

from spirula.engine.checkpoint import Checkpoint, compare, resumed_strategy
from spirula.engine.config import RunConfig, TrainConfig, added_later
from spirula.engine.jobs.pipeline import PipelineConfig


def _old_run_config() -> dict:
    cfg = asdict(RunConfig())
    for name in added_later("train"):  # as saved before the settings existed
        del cfg["train"][name]
    return cfg


def test_resume_from_before_a_setting_existed_sees_no_change():
    ds = {"images": 4, "poses": "p", "train_idx": [1, 2, 3], "intrinsics": "i"}
    ckpt = Checkpoint(Path("c.npz"), 10, {}, _old_run_config(), ds)
    # the strategy's default changed since ("adc" -> "auto"): a resume keeps the checkpoint's
    assert resumed_strategy(ckpt, TrainConfig().strategy) == "adc"
    assert resumed_strategy(ckpt, "mcmc") == "mcmc"
    now = RunConfig(train=TrainConfig(strategy=resumed_strategy(ckpt, "auto")))
    assert compare(ckpt, now, ds) == ([], [])
    blocking, changed = compare(ckpt, RunConfig(train=TrainConfig(strategy="adc", adam_moments="bf16")), ds)
    assert blocking == [] and changed == ["adam_moments 'fp32' -> 'bf16'"]
    assert compare(ckpt, RunConfig(), ds)[1] == ["strategy 'adc' -> 'auto'"]  # said, when not resumed as above


def test_a_setting_at_its_default_keeps_the_train_stage_key():
    default = PipelineConfig(run=RunConfig(train=TrainConfig(strategy="adc"))).stage_settings("train")
    assert default["train"] == {k: v for k, v in _old_run_config()["train"].items() if k != "checkpoint_every"}
    # a project trained before "auto" became the default trains again with it (it may pick mcmc)
    assert PipelineConfig().stage_settings("train") != default
    bf16 = PipelineConfig(run=RunConfig(train=TrainConfig(adam_moments="bf16"))).stage_settings("train")
    assert bf16["train"]["adam_moments"] == "bf16" and bf16 != default


def test_masks_at_auto_keeps_the_train_stage_key_and_another_mode_changes_it():
    from spirula.engine.config import DatasetConfig

    old = PipelineConfig().stage_settings("train")
    assert "masks" not in old["dataset"]  # as keyed before the setting existed
    ignore = PipelineConfig(run=RunConfig(dataset=DatasetConfig(masks="ignore"))).stage_settings("train")
    assert ignore["dataset"]["masks"] == "ignore" and ignore != old
