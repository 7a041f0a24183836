# Installers (packaging/README.md). Linux, on this machine:
#   make package        bundle (PyInstaller) -> .deb (dpkg-deb) -> install check (dpkg -x + installed --selftest)
#   make bundle         only the frozen bundle: build/packaging/dist/spirula-studio/spirula
#   make deb            bundle + dist/spirula-studio_<version>_<arch>.deb
#   make check-deb      the install check of an existing .deb
#   make clean-package  remove build/packaging and the built .deb
# DEB_COMPRESS=zstd (or gzip, none) builds the .deb faster than the default xz, a little larger.
# Windows and macOS have their own recipes (packaging/windows, packaging/macos): not buildable here.

PY           ?= .venv/bin/python
VERSION      := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
ARCH         := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB          := dist/spirula-studio_$(VERSION)_$(ARCH).deb
BUNDLE       := build/packaging/dist/spirula-studio
DEB_COMPRESS ?= xz

.PHONY: package packaging-deps bundle deb check-deb clean-package

package:
	$(MAKE) deb
	$(MAKE) check-deb

packaging-deps:
	packaging/linux/setup.sh

bundle: packaging-deps
	$(PY) -m PyInstaller packaging/pyinstaller/spirula.spec --distpath build/packaging/dist \
	    --workpath build/packaging/work --noconfirm --log-level WARN

deb: bundle
	$(PY) packaging/linux/build_deb.py --bundle $(BUNDLE) --out dist --compress $(DEB_COMPRESS)

check-deb:
	packaging/linux/check_deb.sh $(DEB)

clean-package:
	rm -rf build/packaging $(DEB)
