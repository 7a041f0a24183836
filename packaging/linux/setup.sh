#!/usr/bin/env bash
# Build dependencies of the Linux package (idempotent; run by `make package`):
#  - the project's virtualenv (scripts/setup.sh) plus the `gui` and `packaging` extras (PyInstaller);
#  - Debian tools: dpkg-dev (dpkg-deb, dpkg-shlibdeps), binutils (strip, readelf),
#    desktop-file-utils (validates the menu entry), xvfb + xauth (the installed window's smoke test);
#  - the system libraries the bundled Qt plugins link (Wayland client libraries), so that
#    dpkg-shlibdeps can name their packages in Depends.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/setup.sh >/dev/null
stamp=.venv/.spirula-packaging-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  log=$(mktemp)
  .venv/bin/python -m pip install -q -e '.[test,gui,packaging,video,sfm,mesh]' >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  rm -f "$log"
  touch "$stamp"
fi
pkgs=(dpkg-dev binutils desktop-file-utils xvfb xauth libwayland-cursor0 libwayland-egl1 libwayland-client0)
missing=()
for pkg in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "[packaging] missing Debian packages (install them as root): ${missing[*]}" >&2
    exit 1
  fi
  echo "[packaging] installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "[packaging] ready: PyInstaller $(.venv/bin/python -c 'import PyInstaller; print(PyInstaller.__version__)')"
