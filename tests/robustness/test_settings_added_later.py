"""Settings added after runs were first saved (engine.config.added_later): a checkpoint or
a cached stage written before such a setting existed had its default."""

from dataclasses import asdict
from pathlib import Path

from engine.checkpoint import Checkpoint, compare
from engine.config import RunConfig, TrainConfig, added_later
from engine.pipeline import PipelineConfig


def _old_run_config() -> dict:
    cfg = asdict(RunConfig())
    for name in added_later("train"):  # as saved before the settings existed
        del cfg["train"][name]
    return cfg


def test_resume_from_before_a_setting_existed_sees_no_change():
    ds = {"images": 4, "poses": "p", "train_idx": [1, 2, 3], "intrinsics": "i"}
    ckpt = Checkpoint(Path("c.npz"), 10, {}, _old_run_config(), ds)
    assert compare(ckpt, RunConfig(), ds) == ([], [])
    blocking, changed = compare(ckpt, RunConfig(train=TrainConfig(adam_moments="bf16")), ds)
    assert blocking == [] and changed == ["adam_moments 'fp32' -> 'bf16'"]


def test_a_setting_at_its_default_keeps_the_train_stage_key():
    default = PipelineConfig().stage_settings("train")
    assert default["train"] == {k: v for k, v in _old_run_config()["train"].items() if k != "checkpoint_every"}
    bf16 = PipelineConfig(run=RunConfig(train=TrainConfig(adam_moments="bf16"))).stage_settings("train")
    assert bf16["train"]["adam_moments"] == "bf16" and bf16 != default
