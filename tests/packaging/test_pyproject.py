"""Set-up prints no setuptools warnings: pyproject.toml lists every package the wheel must
hold (each shaders/ sub-folder as a data-only sub-package of `spirula_shaders`, each engine
sub-package), ships the .slang files of each, and gives the licence as an SPDX expression
(the TOML table form is deprecated since setuptools 77)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _config() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_source_folder_is_a_listed_package():
    st = _config()["tool"]["setuptools"]
    listed = set(st["packages"])
    shader_root = REPO / st["package-dir"]["spirula_shaders"]
    want = {"spirula_shaders"} | {
        "spirula_shaders." + ".".join(d.relative_to(shader_root).parts)
        for d in shader_root.rglob("*") if d.is_dir() and any(d.glob("*.slang"))}
    for top in ("spirula",):
        want |= {".".join(d.relative_to(REPO).parts) for d in (REPO / top).rglob("*")
                 if d.is_dir() and (d / "__init__.py").is_file()} | {top}
    assert want <= listed, sorted(want - listed)
    data = st["package-data"]
    assert all("*.slang" in data.get(p, []) for p in want if p.startswith("spirula_shaders")), data


def test_licence_is_an_spdx_string_and_setuptools_can_read_it():
    cfg = _config()
    assert isinstance(cfg["project"]["license"], str)
    req = next(r for r in cfg["build-system"]["requires"] if r.startswith("setuptools"))
    assert int(re.search(r">=(\d+)", req).group(1)) >= 77
