"""The Dataset panel groups a wide image's pinhole faces (spirula/engine/ingest/faces.py) by their
image: listed under its name, held out and excluded together, as the engine's hold-out does."""

from __future__ import annotations

from spirula.engine.ingest.dataset import holdout_by_image
from spirula.engine.studio import protocol as M


def _scene(cameras) -> M.SceneLoaded:
    return M.SceneLoaded("review", "wide", "/tmp/wide", 0, (0.0, 0.0, 0.0), 1.0, (0.0, 0.0, 1.0), tuple(cameras))


def _cam(name, source="", face=""):
    return M.CameraInfo(name, tuple(float(v) for v in range(16)), 10.0, 10.0, 8.0, 8.0, 16, 16, "train",
                        source=source, face=face)


def test_faces_are_grouped_and_split_by_image(qapp):
    from spirula.app.dataset_panel import DatasetPanel

    faces = ("down", "front", "left", "right", "up")
    cams = [_cam(f"{img}#{f}", img, f) for img in ("a.png", "b.png", "c.png") for f in faces]
    cams.append(_cam("d.png"))  # a pinhole image beside them
    panel = DatasetPanel()
    panel.set_scene(_scene(cams))
    panel.hold_out_every(2)
    held = [c.name for c, s in zip(cams, panel.splits) if s == "test"]
    assert held == [f"a.png#{f}" for f in faces] + [f"c.png#{f}" for f in faces]
    _, test, _ = holdout_by_image([c.source or c.name for c in cams], 2)  # the engine's rule agrees
    assert held == [cams[i].name for i in test]
    assert "4 registered images as 16 pinhole faces" in panel.summary.text()
    assert panel.list.item(1).text() == "a.png · front"
    # excluding one face excludes its image's other faces
    panel.list.item(6).setSelected(True)   # b.png#front
    panel.set_selected("excluded")
    assert [c.name for c, s in zip(cams, panel.splits) if s == "excluded"] == [f"b.png#{f}" for f in faces]
