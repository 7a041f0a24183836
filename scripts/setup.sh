#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine (run as root), idempotent:
#  - Mesa 25 software Vulkan from bookworm-backports when no hardware Vulkan device exists
#  - a virtualenv in .venv with the project and its test dependencies
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

have_hw_vulkan() {
  # A vendor ICD other than Mesa's lavapipe means a real GPU driver is installed.
  ls /usr/share/vulkan/icd.d/ /etc/vulkan/icd.d/ 2>/dev/null | grep -v -E 'lvp|^$' | grep -q json
}
mesa_major() {
  dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | sed -E 's/^([0-9]+:)?([0-9]+).*/\2/'
}

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  if ! have_hw_vulkan && [ "$(mesa_major || echo 0)" -lt 25 ] 2>/dev/null || { ! have_hw_vulkan && [ -z "$(mesa_major)" ]; }; then
    echo "[setup] no hardware Vulkan driver: installing Mesa software Vulkan (lavapipe) from bookworm-backports"
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
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq -t "${codename}-backports" mesa-vulkan-drivers libvulkan1 >/dev/null
  fi
  if ! $PY -c 'import venv, ensurepip' 2>/dev/null; then
    apt-get install -y -qq python3-venv >/dev/null
  fi
fi

if [ ! -x .venv/bin/python ]; then
  $PY -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
echo "[setup] done: $(.venv/bin/python -c 'import slangpy; print("slangpy", slangpy.__version__ if hasattr(slangpy, "__version__") else "")')"
