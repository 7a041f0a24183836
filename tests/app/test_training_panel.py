"""The Training panel on its own (no engine): what its progress bar says before and during a run."""

from __future__ import annotations


def test_the_progress_bar_says_no_training_until_a_run_has_its_length(qapp):
    from spirula.app.training_panel import TrainingPanel

    panel = TrainingPanel()
    assert panel.progress.text() == "no training yet"     # not "0 / 1 steps" on a first launch
    panel.reset_curves(2000)
    assert panel.progress.text() == "0 / 2000 steps" and panel.total == 2000
    panel.set_total(3000)                                # the engine's StageStarted says the real length
    assert panel.progress.text() == "0 / 3000 steps" and panel.total == 3000


def test_start_after_a_finished_run_says_it_trains_again(qapp):
    """A finished run leaves Start enabled: it names what it does (a new project) rather than
    reading as the same button that started the finished one."""
    from spirula.app.training_panel import TrainingPanel

    panel = TrainingPanel()
    panel.set_dataset("/data/mouse")
    assert panel.start_btn.isEnabled() and panel.start_btn.text() == "Start"
    panel.set_state("running")
    assert not panel.start_btn.isEnabled()
    panel.set_state("finished", "done: 2000 steps")
    assert panel.start_btn.isEnabled() and panel.start_btn.text() == "Train again"
    assert "new project" in panel.start_btn.toolTip()
    panel.set_dataset("/data/fox")                  # another dataset: a first run again
    assert panel.start_btn.text() == "Start"


def test_the_fast_preset_sends_the_engine_presets_schedule(qapp):
    """The studio's Fast preset is spirula/engine/config.py's `fast` (its steps and its MCMC refine window,
    set there only); the other presets send the default window."""
    from spirula.app.training_panel import TrainingPanel
    from spirula.engine.config import TrainConfig, preset_settings
    from spirula.engine.studio import protocol as M

    panel = TrainingPanel()
    panel.preset.setCurrentText("Fast (10,000 steps)")
    s = panel.settings()
    fast = preset_settings("fast")
    assert s["steps"] == fast["steps"] and s["mcmc_refine_until"] == fast["mcmc_refine_until"]
    assert s["max_gaussians"] == TrainConfig.mcmc_budget
    assert M.StartTraining("d", **s).mcmc_refine_until == fast["mcmc_refine_until"]
    panel.preset.setCurrentText("Full (3DGS)")
    from spirula.engine.studio.scenes import run_config

    assert run_config(M.StartTraining("d", **panel.settings()), "vulkan").train.mcmc_refine_until == \
        TrainConfig.mcmc_refine_until


def test_the_geometry_phase_is_on_for_meshing_and_reaches_the_run(qapp):
    """The panel trains with the geometry phase by default (the studio exports meshes); the
    setting reaches the run's TrainConfig, is remembered, and a saved run's is read back."""
    from spirula.engine.studio import protocol as M
    from spirula.engine.settings import from_saved
    from spirula.engine.studio.scenes import run_config

    from spirula.app.training_panel import TrainingPanel

    panel = TrainingPanel()
    s = panel.settings()
    assert s["geometry"] is True
    assert run_config(M.StartTraining("d", **s), "vulkan").train.geometry is True
    panel.geometry.setChecked(False)
    assert run_config(M.StartTraining("d", **panel.settings()), "vulkan").train.geometry is False
    other = TrainingPanel()
    other.restore(panel.values())
    assert other.geometry.isChecked() is False
    assert from_saved({"train": {"geometry": True}})["geometry"] is True
    # a studio checkpoint saved before the setting: trained without
    assert run_config(M.StartTraining("d"), "vulkan").train.geometry is False


def test_the_panel_shows_the_tables_basic_group(qapp):
    """Every setting of the table's basic group has its row (label and help from the table),
    and only those; the rest are in the All options editor."""
    from PySide6 import QtWidgets

    from spirula.app.training_panel import TrainingPanel
    from spirula.engine import settings as table

    panel = TrainingPanel()
    assert sorted(panel.ORDER) == sorted(s.name for s in table.basic())
    form = panel.findChild(QtWidgets.QFormLayout)
    labels = {form.itemAt(k, QtWidgets.QFormLayout.ItemRole.LabelRole).widget().text()
              for k in range(form.rowCount()) if form.itemAt(k, QtWidgets.QFormLayout.ItemRole.LabelRole)}
    for s in table.basic():
        w = getattr(panel, panel.WIDGETS[s.name])
        assert s.help in w.toolTip()
        assert s.title in labels or (s.type is bool and w.text() == s.title[0].lower() + s.title[1:])
