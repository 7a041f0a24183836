#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine (run as root), idempotent:
#  - a virtualenv in .venv with the project (editable) and its test dependencies;
#  - when no Vulkan device can be created (no GPU driver, or Debian 12's Mesa 22 which
#    slangpy cannot use), Mesa 25 software Vulkan (lavapipe) from bookworm-backports.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export DEBIAN_FRONTEND=noninteractive
as_root() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; }
# apt_get: apt-get waiting (up to 5 minutes, saying so once) for the package manager's lock
. scripts/apt_wait.sh

if ! $PY -c 'import venv, ensurepip' 2>/dev/null; then
  as_root || { echo "[setup] python3-venv is missing: install it (apt-get install python3-venv)" >&2; exit 1; }
  apt_get update -qq && apt_get install -y -qq python3-venv >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
  $PY -m venv .venv
fi
stamp=.venv/.spirula-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[test,distributed,video,sfm,mesh]'
  touch "$stamp"
fi

vulkan_ok() {
  .venv/bin/python - <<'PY' >/dev/null 2>&1
import slangpy as spy
spy.Device(type=spy.DeviceType.vulkan, enable_hot_reload=False)
PY
}
if ! vulkan_ok; then
  as_root || { echo "[setup] no Vulkan device and not root: install Mesa >= 25 (mesa-vulkan-drivers from bookworm-backports) or a GPU driver" >&2; exit 1; }
  echo "[setup] no usable Vulkan device: installing Mesa software Vulkan (lavapipe) from bookworm-backports"
  codename=$(. /etc/os-release; echo "${VERSION_CODENAME:-bookworm}")
  if ! grep -rqs "${codename}-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
    cat > /etc/apt/sources.list.d/spirula-backports.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: ${codename}-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  fi
  apt_get update -qq
  apt_get install -y -qq -t "${codename}-backports" mesa-vulkan-drivers libvulkan1 >/dev/null
  vulkan_ok || { echo "[setup] Vulkan still unavailable after installing Mesa" >&2; exit 1; }
fi
# The studio window's tests run Qt on a private Xvfb display (the Vulkan viewport presents
# into it): Xvfb and the X11 libraries Qt's xcb platform loads, and xdotool, which drives the
# real mouse for the drag from another application (tests/app/test_studio_xdnd.py). Root
# only; a no-op once there.
qt_x11_pkgs=(xvfb xauth xdotool libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 libxcb-shape0
             libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 libegl1 libgl1 libfontconfig1
             libdbus-1-3)
if as_root; then
  missing=()
  for pkg in "${qt_x11_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "[setup] installing X11 libraries for the studio window tests: ${missing[*]}"
    apt_get update -qq
    apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
else
  command -v Xvfb >/dev/null ||
    echo "[setup] note: Xvfb is missing, so the studio window tests will be skipped (apt-get install xvfb)"
  command -v xdotool >/dev/null ||
    echo "[setup] note: xdotool is missing, so the drag from another application is not tested (apt-get install xdotool)"
fi
# The independent reader of the splat formats' interop tests (tests/io/test_interop.py):
# PlayCanvas's splat-transform (npm), pinned, in the ignored .tools/ folder. Node.js and npm
# come from apt when missing (root only); without them the interop tests skip and say why.
SPLAT_TRANSFORM_VERSION=2.7.1
# Khronos's glTF validator (npm gltf-validator), pinned, for the glTF splat tests (tests/io/test_gltf.py)
GLTF_VALIDATOR_VERSION=2.0.0-dev.3.10
# PlayCanvas's SuperSplat viewer (npm, MIT), pinned: `spirula export --format html` inlines its bundle
# (spirula/engine/io/html.py VIEWER_VERSION says the same version)
SUPERSPLAT_VIEWER_VERSION=1.36.2
if ! command -v npm >/dev/null && as_root; then
  echo "[setup] installing Node.js and npm for the splat-format interop tests"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
st=.tools/node_modules/@playcanvas/splat-transform/package.json
if command -v npm >/dev/null; then
  if ! grep -qs "\"version\": \"${SPLAT_TRANSFORM_VERSION}\"" "$st"; then
    echo "[setup] installing @playcanvas/splat-transform ${SPLAT_TRANSFORM_VERSION} into .tools/"
    mkdir -p .tools
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "@playcanvas/splat-transform@${SPLAT_TRANSFORM_VERSION}" >/dev/null \
      || echo "[setup] note: npm could not install splat-transform; the interop tests will be skipped" >&2
  fi
  if ! grep -qs "\"version\": \"${GLTF_VALIDATOR_VERSION}\"" .tools/node_modules/gltf-validator/package.json; then
    echo "[setup] installing gltf-validator ${GLTF_VALIDATOR_VERSION} into .tools/"
    mkdir -p .tools
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "gltf-validator@${GLTF_VALIDATOR_VERSION}" >/dev/null \
      || echo "[setup] note: npm could not install gltf-validator; the glTF validation tests will be skipped" >&2
  fi
  if ! grep -qs "\"version\": \"${SUPERSPLAT_VIEWER_VERSION}\"" .tools/node_modules/@playcanvas/supersplat-viewer/package.json; then
    echo "[setup] installing @playcanvas/supersplat-viewer ${SUPERSPLAT_VIEWER_VERSION} into .tools/ (the HTML export's viewer)"
    mkdir -p .tools
    npm install --prefix .tools --no-audit --no-fund --loglevel=error \
      "@playcanvas/supersplat-viewer@${SUPERSPLAT_VIEWER_VERSION}" >/dev/null \
      || echo "[setup] note: npm could not install the web viewer; spirula export --format html will say so" >&2
  fi
else
  echo "[setup] note: npm is missing, so the splat-format interop tests will be skipped (apt-get install nodejs npm)"
fi
# Headless Chromium opens the HTML export in its test (tests/io/test_html.py); root only, from Debian.
if as_root && ! command -v chromium >/dev/null; then
  echo "[setup] installing chromium for the HTML export's browser test"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends chromium >/dev/null \
    || echo "[setup] note: chromium could not be installed; the HTML page's browser test will be skipped" >&2
elif ! command -v chromium >/dev/null; then
  echo "[setup] note: chromium is missing, so the HTML export's browser test will be skipped (apt-get install chromium)"
fi
echo "[setup] ready: $(.venv/bin/python -c 'import slangpy as s; d=s.Device(type=s.DeviceType.vulkan, enable_hot_reload=False); print(d.info.adapter_name)' 2>/dev/null)"
