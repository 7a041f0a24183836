"""The export panel's format chooser: every format with the size it would have (no Qt for
the model; pytest-qt for the panel), and the mesh button's hint."""

from __future__ import annotations

import numpy as np

from spirula.app.export_formats import choices, default_name, human_bytes
from spirula.engine.io import formats
from tests.io.splat_cases import random_gaussians


def test_choices_list_every_format_with_its_size(tmp_path):
    g = random_gaussians(np.random.default_rng(0), 1000, 3)
    cs = choices(1000, 3)
    assert [c.format for c in cs] == list(formats.EXPORT_FORMATS) and cs[0].format == "ply"
    for c in cs:
        path = tmp_path / f"x{c.extension}"
        formats.write_any(path, g, c.format)
        if c.exact:
            assert c.size == path.stat().st_size and "about" not in c.label
        else:
            assert "about" in c.label
            if c.format in ("glb", "gltf", "html"):   # the arrays exact, the JSON about; SOG's about + the viewer
                assert abs(c.size - path.stat().st_size) < {"html": 0.1}.get(c.format, 0.02) * path.stat().st_size
        assert human_bytes(c.size).split()[0] in c.label and c.extension in c.filter.replace("*", "")
    sizes = {c.format: c.size for c in cs}
    assert max(sizes["spz"], sizes["sog"]) < sizes["splat"] < sizes["compressed-ply"] < sizes["ply"]
    assert default_name("/p/q", "sog") == "/p/q/export.sog" and default_name("", "spz") == "export.spz"


def test_panel_chooser_follows_the_scene(qapp):
    from spirula.app.export_panel import ExportPanel

    p = ExportPanel()
    p.set_scene_size(100_000, 3)
    assert p.format.count() == len(formats.EXPORT_FORMATS) and p.current_format() == "ply"
    p.format.setCurrentIndex(p.format.findData("spz"))
    assert "SPZ" in p.format.currentText() and "MB" in p.format.currentText()
    before = p.format.currentText()
    p.set_scene_size(200_000)   # training grew: sizes change, the choice stays
    assert p.current_format() == "spz" and p.format.currentText() != before
    p.set_scene_size(200_000, 0)
    assert "68 B/splat" in p.format.itemText(p.format.findData("ply"))   # 17 floats without SH
    p.deleteLater()


def test_the_mesh_hint_says_to_wait_while_training_and_ready_after(qapp, tmp_path):
    from spirula.app.export_panel import ExportPanel

    p = ExportPanel()
    p.set_project(str(tmp_path), training=True)         # training under way, nothing saved yet
    assert not p.mesh_btn.isEnabled() and p.mesh_status.text().startswith("Available when the training has finished")
    (tmp_path / "splat.ply").write_bytes(b"ply")
    (tmp_path / "train.json").write_text("{}")
    p.set_project(str(tmp_path), training=True)         # a rerun's old outputs: not meshed while it trains
    assert not p.mesh_btn.isEnabled()
    p.set_project(str(tmp_path))                        # done: it can be meshed
    assert p.mesh_btn.isEnabled() and p.mesh_status.text().startswith("Ready")
    p.set_project("")
    assert p.mesh_status.text().startswith("Train or open a trained project first")


def test_meshing_again_asks_first_and_a_no_sends_nothing(qapp, tmp_path, monkeypatch):
    """Re-meshing never replaces a mesh without asking (issue 47); the first mesh is not asked for."""
    from PySide6 import QtWidgets

    from spirula.app.export_panel import ExportPanel

    p = ExportPanel()
    (tmp_path / "splat.ply").write_bytes(b"ply")
    (tmp_path / "train.json").write_text("{}")
    p.set_project(str(tmp_path))
    sent, asked = [], []
    p.mesh_requested.connect(sent.append)
    answer = [QtWidgets.QMessageBox.StandardButton.Cancel]
    monkeypatch.setattr(QtWidgets.QMessageBox, "question", lambda *a, **k: asked.append(a) or answer[0])
    p.mesh_btn.click()                                  # no mesh yet: no question
    assert len(sent) == 1 and not asked
    (tmp_path / "mesh.json").write_text("{}")
    p.mesh_btn.click()                                  # a mesh there: asked, Cancel sends nothing
    assert len(sent) == 1 and len(asked) == 1
    answer[0] = QtWidgets.QMessageBox.StandardButton.Yes
    p.mesh_btn.click()
    assert len(sent) == 2 and len(asked) == 2
    p.deleteLater()
