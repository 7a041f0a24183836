"""The Partition panel: the preview of a COLMAP dataset's split from above, counts per part
that follow the sliders (the engine's split, checked against the panel's table), and no
Train for what cannot be partitioned."""

import numpy as np
import pytest

from spirula.engine.partition.geometry import read_geometry
from spirula.engine.partition.split import SplitSettings, split_scene
from spirula.engine.studio import protocol as M
from tests.partition.city import make_city, write_city


def _scene(path, kind="dataset"):
    return M.SceneLoaded(kind=kind, name=path.name, path=str(path), num_gaussians=0, center=(0, 0, 0), radius=1.0,
                         up=(0, 0, 1))


@pytest.mark.parametrize("kind", ["review", "dataset"])  # opened for review, or training
def test_panel_previews_the_split_and_follows_the_sliders(qapp, tmp_path, kind):
    from spirula.app.partition_panel import PartitionPanel

    root = tmp_path / "city"
    write_city(root, make_city(blocks=3, width=32, height=24), points=1500)
    panel = PartitionPanel()
    panel.resize(420, 640)
    panel.show()
    panel.set_scene(_scene(root, kind))
    geo = read_geometry(root)
    for parts, overlap in ((4, 15), (2, 30)):
        panel.parts.setValue(parts)
        panel.overlap.setValue(overlap)
        qapp.processEvents()
        want = split_scene(geo, SplitSettings(parts=parts, overlap=overlap / 100, min_cameras=4))
        assert panel.table.rowCount() == parts
        for r, c in enumerate(want.cells):
            assert panel.table.item(r, 1).text().startswith(f"{len(c.cameras)} ")
            assert panel.table.item(r, 2).text() == f"{c.points:,}"
        assert len(panel.view.cells) == parts and panel.train_button.isEnabled()
    img = panel.view.grab().toImage()
    assert img.width() > 100  # drawn: the cells' colours are on it
    px = np.array([[img.pixelColor(x, y).name() for x in range(0, img.width(), 3)] for y in range(0, img.height(), 3)])
    assert (px == "#ffaa3c").any() or (px == "#5ac8ff").any()
    panel.set_scene(_scene(tmp_path / "model.ply", kind="ply"))
    assert not panel.train_button.isEnabled() and "COLMAP" in panel.summary.text()
    panel.close()


def test_train_goes_to_the_engine_thread_and_its_messages_drive_the_rows(qapp, tmp_path):
    """Train sends TrainPartition (the engine thread runs it, spirula/engine/studio/partitioning.py);
    Stop sends Cancel; the job's messages (PartitionMessage's, spirula/app/window.py) make a row per
    part, and Done ends the run (Train again enabled)."""
    from spirula.app.partition_panel import PartitionPanel
    from spirula.engine.messages import Done, StageProgress, StageStarted

    root = tmp_path / "city"
    write_city(root, make_city(blocks=2, width=32, height=24), points=800)
    panel = PartitionPanel()
    sent = []
    panel.send = sent.append
    panel.set_scene(_scene(root))
    panel.parts.setValue(2)
    qapp.processEvents()
    panel.train_button.click()
    cmd, = sent
    assert isinstance(cmd, M.TrainPartition) and cmd.dataset == str(root) and cmd.split == panel.settings()
    assert cmd.parts_dir == str(tmp_path / "city-parts") and cmd.project == str(tmp_path / "city-partitioned")
    assert not panel.train_button.isEnabled() and panel.stop_button.isEnabled()
    panel.handle(StageStarted("part_00", 300))
    panel.handle(StageProgress("part_00", 120, 300, "loss 0.1"))
    assert panel.rows["part_00"].value() == 120
    panel.stop_button.click()
    assert isinstance(sent[-1], M.Cancel)
    panel.handle(Done({"stopped": True}))
    assert panel.train_button.isEnabled() and not panel.stop_button.isEnabled()
    assert "Train again resumes" in panel.status.text()
