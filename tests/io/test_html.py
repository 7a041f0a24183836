"""`spirula export --format html` (spirula/engine/io/html.py): one self-contained page (no other file,
no network) that headless Chromium opens from disk and that shows the scene: a screenshot's
centre is not the background colour. Skipped, saying why, where Chromium or the viewer
bundle (scripts/setup.sh installs both) is missing."""

from __future__ import annotations

import io
import time

import numpy as np
import pytest

from spirula.engine.errors import SplatFileError
from spirula.engine.io import formats
from spirula.engine.io.html import BACKGROUND, viewer_dir, write_html
from spirula.engine.io.ply import write_ply
from tests.io.headless_chromium import Chromium, find_chromium
from tests.io.splat_cases import random_gaussians


def _scene(n=3000):
    """Opaque, fairly large splats of bright colours in a cube of half size 1."""
    rng = np.random.default_rng(21)
    g = random_gaussians(rng, n, 1, extent=1.0)
    g.scales = np.log(rng.uniform(0.03, 0.1, (n, 3))).astype(np.float32)
    g.opacities = rng.uniform(2.0, 5.0, n).astype(np.float32)
    return g


def test_page_is_self_contained(tmp_path, capsys):
    if viewer_dir() is None:
        pytest.skip("the web viewer (@playcanvas/supersplat-viewer) is not installed: run scripts/setup.sh")
    from spirula.engine.cli.main import main

    write_ply(tmp_path / "s.ply", _scene(500))
    out = tmp_path / "page" / "scene.html"
    assert main(["export", str(tmp_path / "s.ply"), "-o", str(out)]) == 0
    assert [p.name for p in out.parent.iterdir()] == ["scene.html"]
    text = out.read_text(encoding="utf-8")
    assert "createViewer(" in text and "const SPIRULA_SPLATS = \"" in text
    assert "<script src" not in text and "<link" not in text and "import " not in text.split("<script", 1)[0]
    size, exact = formats.estimated_bytes("html", 500, 1)
    assert not exact and abs(size - out.stat().st_size) < 0.1 * out.stat().st_size
    with pytest.raises(SplatFileError, match="no Gaussians"):
        write_html(tmp_path / "empty.html", random_gaussians(np.random.default_rng(0), 0, 0))
    assert not (tmp_path / "empty.html").exists()


def test_missing_viewer_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr("spirula.engine.io.html.viewer_dir", lambda: None)
    with pytest.raises(SplatFileError) as e:
        write_html(tmp_path / "x.html", _scene(10))
    assert str(e.value).startswith(f"{tmp_path / 'x.html'}: HTML file: not written: the web viewer") and \
        "scripts/setup.sh" in str(e.value)
    assert not (tmp_path / "x.html").exists()


def test_headless_chromium_shows_the_scene(tmp_path):
    exe = find_chromium()
    if exe is None:
        pytest.skip("no Chromium to open the page (Debian: apt-get install chromium; scripts/setup.sh does)")
    if viewer_dir() is None:
        pytest.skip("the web viewer (@playcanvas/supersplat-viewer) is not installed: run scripts/setup.sh")
    from PIL import Image

    write_html(tmp_path / "scene.html", _scene())
    bg = np.array(BACKGROUND) * 255
    browser = Chromium(exe, 320, 240)
    try:
        browser.open((tmp_path / "scene.html").as_uri())
        end, centre = time.monotonic() + 150, bg
        while time.monotonic() < end:      # software WebGL: the first frame takes 10-30 s here
            time.sleep(2)
            shot = np.asarray(Image.open(io.BytesIO(browser.screenshot())).convert("RGB"), np.float64)
            h, w, _ = shot.shape
            centre = shot[h // 2 - 8:h // 2 + 8, w // 2 - 8:w // 2 + 8].reshape(-1, 3).mean(0)
            if np.abs(centre - bg).max() > 25:
                break
        errors = [m for m in browser.console if m.startswith("exception")]
    finally:
        browser.close()
    assert (h, w) == (240, 320)
    assert np.abs(centre - bg).max() > 25, f"the page's centre stayed the background {centre}; console: {errors}"
    assert not errors, errors
