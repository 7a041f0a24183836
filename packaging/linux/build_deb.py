#!/usr/bin/env python3
"""Build the Debian package of Spirula Studio from the frozen bundle (PyInstaller, see
packaging/pyinstaller/spirula.spec):

    python packaging/linux/build_deb.py --bundle build/packaging/dist/spirula-studio --out dist

Layout of the package::

    /opt/spirula-studio/                    the bundle: `spirula` + _internal/ (Python, Qt, slangpy, ...)
    /usr/bin/spirula                        -> ../../opt/spirula-studio/spirula (relative: works under dpkg -x)
    /usr/share/applications/spirula-studio.desktop     menu entry, "Open with" for videos and .ply
    /usr/share/mime/packages/spirula-studio.xml        the model/x-ply MIME type (Debian 12 has none)
    /usr/share/icons/hicolor/{scalable,48x48,128x128,256x256}/apps/spirula-studio.{svg,png}
    /usr/share/doc/spirula-studio/copyright            licences, including the fox sample's (non-commercial)

Depends are computed by dpkg-shlibdeps from every ELF file of the bundle (the distribution's
own libraries were left out of the bundle on purpose: libstdc++, X11/xcb, EGL/GL, glib, dbus...),
plus libvulkan1, which slangpy opens at run time (dlopen, invisible to dpkg-shlibdeps). Mesa's
Vulkan drivers are a Recommends: a machine with a GPU driver does not need them; a machine
without one runs on lavapipe (Mesa >= 25; Debian 12's 22.3 cannot create a slangpy device).
dpkg's file triggers refresh the desktop, MIME and icon caches; no maintainer scripts.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PACKAGE = "spirula-studio"
MAINTAINER = "Spirula Studio developers <dev@spirula.studio>"
EXTRA_DEPENDS = ["libvulkan1"]                  # dlopen()ed by slangpy
RECOMMENDS = ["mesa-vulkan-drivers"]            # software Vulkan (lavapipe) and Mesa's GPU drivers
ICON_SIZES = (48, 128, 256)


class BuildError(Exception):
    pass


def project_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise BuildError(f"{' '.join(cmd[:3])} ... failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return r


def is_elf(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def shlib_depends(bundle: Path) -> str:
    """dpkg-shlibdeps over every ELF file of the bundle: the Depends of the system libraries
    it needs, with version constraints from the distribution's symbols files."""
    elves = sorted(p for p in bundle.rglob("*") if p.is_file() and not p.is_symlink() and is_elf(p))
    if not elves:
        raise BuildError(f"no ELF file in {bundle}: is it a PyInstaller bundle?")
    libdirs = sorted({str(p.parent) for p in elves})
    with tempfile.TemporaryDirectory() as tmp:  # dpkg-shlibdeps wants a debian/control to read
        (Path(tmp) / "debian").mkdir()
        (Path(tmp) / "debian" / "control").write_text(
            f"Source: {PACKAGE}\n\nPackage: {PACKAGE}\nArchitecture: any\n", encoding="utf-8")
        cmd = ["dpkg-shlibdeps", "-O", "--ignore-missing-info", "--warnings=1"]
        cmd += [f"-l{d}" for d in libdirs] + [str(p) for p in elves]
        r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        missing = sorted(set(re.findall(r"cannot find library (\S+) needed by (\S+)", r.stderr)))
        detail = "\n".join(f"  {lib} (needed by {Path(by).relative_to(bundle)})" for lib, by in missing)
        raise BuildError("dpkg-shlibdeps failed: libraries neither bundled nor installed here:\n"
                         + (detail or r.stderr[-4000:]))
    m = re.search(r"^shlibs:Depends=(.*)$", r.stdout, re.M)
    return m.group(1).strip() if m else ""


def merge_depends(auto: str, extra: list[str]) -> str:
    deps = [d.strip() for d in auto.split(",") if d.strip()]
    names = {re.split(r"[\s(]", d, maxsplit=1)[0] for d in deps}
    deps += [e for e in extra if e not in names]
    return ", ".join(deps)


def render_icons(svg: Path, out_root: Path) -> None:
    """PNG icons from the SVG (PySide6's QtSvg, offscreen), for desktops without SVG icons."""
    code = f"""
import sys
from PySide6 import QtCore, QtGui, QtSvg
app = QtGui.QGuiApplication(sys.argv[:1])
r = QtSvg.QSvgRenderer({str(svg)!r})
assert r.isValid(), 'invalid SVG'
for size in {ICON_SIZES!r}:
    img = QtGui.QImage(size, size, QtGui.QImage.Format_ARGB32)
    img.fill(0)
    p = QtGui.QPainter(img); r.render(p); p.end()
    dest = {str(out_root)!r} + f'/{{size}}x{{size}}/apps/{PACKAGE}.png'
    QtCore.QDir().mkpath(dest.rsplit('/', 1)[0])
    assert img.save(dest, 'PNG'), dest
"""
    run([sys.executable, "-c", code], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})


def copyright_text(bundle: Path) -> str:
    fox = REPO / "resources" / "sample" / "fox"
    return (f"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
            f"Upstream-Name: Spirula Studio\n\n"
            f"Files: *\nCopyright: Spirula Studio developers\nLicense: Proprietary\n\n"
            f"Files: opt/{PACKAGE}/_internal/resources/sample/fox/*\n"
            f"Copyright: NVIDIA Corporation (instant-ngp fox dataset)\n"
            f"License: NVIDIA Source Code License-NC\n"
            f" Non-commercial research and evaluation use only. Full text in\n"
            f" /opt/{PACKAGE}/_internal/resources/sample/fox/LICENSE.txt; attribution in ATTRIBUTION.md there.\n\n"
            f"Files: opt/{PACKAGE}/_internal/*\n"
            f"Copyright: the respective authors of the bundled Python runtime and libraries\n"
            f"License: various (PSF, LGPL-3 (Qt, PySide6), Apache-2.0 WITH LLVM-exception (slangpy), BSD,\n"
            f" MIT, LGPL/GPL (FFmpeg in PyAV)); see the *.dist-info folders and licence files in the bundle.\n"
            + ("" if (fox / "LICENSE.txt").is_file() else "\nWARNING: the sample's LICENSE.txt is missing\n"))


def _link_or_copy(src: str, dst: str) -> None:
    """Hard link (the bundle is hundreds of MB; staging is a view of it), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def stage_tree(bundle: Path, stage: Path) -> None:
    if stage.exists():
        shutil.rmtree(stage)
    opt = stage / "opt" / PACKAGE
    opt.parent.mkdir(parents=True)
    shutil.copytree(bundle, opt, symlinks=True, copy_function=_link_or_copy)
    (stage / "usr" / "bin").mkdir(parents=True)
    os.symlink(f"../../opt/{PACKAGE}/spirula", stage / "usr" / "bin" / "spirula")
    share = stage / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    shutil.copy2(HERE / f"{PACKAGE}.desktop", share / "applications" / f"{PACKAGE}.desktop")
    (share / "mime" / "packages").mkdir(parents=True)
    shutil.copy2(HERE / f"{PACKAGE}.xml", share / "mime" / "packages" / f"{PACKAGE}.xml")
    icons = share / "icons" / "hicolor"
    (icons / "scalable" / "apps").mkdir(parents=True)
    svg = REPO / "resources" / "icons" / "spirula.svg"
    shutil.copy2(svg, icons / "scalable" / "apps" / f"{PACKAGE}.svg")
    render_icons(svg, icons)
    doc = share / "doc" / PACKAGE
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(copyright_text(bundle), encoding="utf-8")
    # ordinary permissions whatever the umask of the build: dirs and executables 755, files 644
    for root, dirs, files in os.walk(stage):
        for d in dirs:
            p = Path(root) / d
            if not p.is_symlink():
                p.chmod(0o755)
        for f in files:
            p = Path(root) / f
            if not p.is_symlink():
                p.chmod(0o755 if os.access(p, os.X_OK) or is_elf(p) else 0o644)


def installed_size_kib(stage: Path) -> int:
    total = 0
    for root, dirs, files in os.walk(stage):
        if "DEBIAN" in Path(root).parts:
            continue
        for f in files:
            p = Path(root) / f
            total += p.lstat().st_size if p.is_symlink() else p.stat().st_size
    return (total + 1023) // 1024


def build(bundle: Path, out: Path, work: Path, version: str, compress: str = "xz") -> Path:
    if not (bundle / "spirula").is_file():
        raise BuildError(f"{bundle / 'spirula'} not found: build the bundle first (make bundle)")
    for tool in ("dpkg-deb", "dpkg-shlibdeps"):
        if shutil.which(tool) is None:
            raise BuildError(f"{tool} not found: apt-get install dpkg-dev (packaging/linux/setup.sh does this)")
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    stage = work / f"{PACKAGE}_{version}_{arch}"
    print(f"[deb] staging {stage}")
    stage_tree(bundle, stage)
    print("[deb] computing Depends with dpkg-shlibdeps")
    depends = merge_depends(shlib_depends(stage / "opt" / PACKAGE), EXTRA_DEPENDS)
    control = (f"Package: {PACKAGE}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: {MAINTAINER}\n"
               f"Installed-Size: {installed_size_kib(stage)}\nDepends: {depends}\n"
               f"Recommends: {', '.join(RECOMMENDS)}\nSection: graphics\nPriority: optional\n"
               f"Description: 3D Gaussian Splatting studio on any Vulkan GPU\n"
               f" Turns a phone video or a folder of photos into a trained 3D Gaussian Splatting\n"
               f" model and a textured mesh. Training kernels are Slang compute shaders run\n"
               f" through slangpy on Vulkan (or CUDA); the studio window is Qt (PySide6).\n"
               f" Self-contained: Python and all libraries are bundled in /opt/{PACKAGE}.\n"
               f" Run `spirula --selftest` to check the installation and the GPU.\n")
    (stage / "DEBIAN").mkdir()
    (stage / "DEBIAN" / "control").write_text(control, encoding="utf-8")
    out.mkdir(parents=True, exist_ok=True)
    deb = out / f"{PACKAGE}_{version}_{arch}.deb"
    print(f"[deb] dpkg-deb --build ({compress}) -> {deb}")
    run(["dpkg-deb", "--root-owner-group", f"-Z{compress}", "--build", str(stage), str(deb)])
    print(f"[deb] Depends: {depends}")
    print(f"[deb] {deb}: {deb.stat().st_size / 2**20:.1f} MiB, installed {installed_size_kib(stage) / 1024:.0f} MiB")
    return deb


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", type=Path, default=REPO / "build" / "packaging" / "dist" / PACKAGE)
    ap.add_argument("--out", type=Path, default=REPO / "dist")
    ap.add_argument("--work", type=Path, default=REPO / "build" / "packaging" / "deb")
    ap.add_argument("--version", default=None, help="package version (default: pyproject.toml's)")
    ap.add_argument("--compress", default="xz", choices=["xz", "gzip", "zstd", "none"])
    a = ap.parse_args(argv)
    try:
        build(a.bundle.resolve(), a.out.resolve(), a.work.resolve(), a.version or project_version(), a.compress)
    except BuildError as e:
        print(f"[deb] error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
