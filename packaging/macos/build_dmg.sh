#!/usr/bin/env bash
# Build "Spirula Studio.app" and a .dmg on macOS 12+ (Apple silicon or Intel; the bundle is for the
# architecture of the Python that builds it). NOT RUN on the project's machines (Linux only): see
# packaging/README.md. Run from the repository root:
#   VULKAN_SDK=~/VulkanSDK/<version>/macOS packaging/macos/build_dmg.sh
# Vulkan on macOS is MoltenVK (Vulkan over Metal). The app carries the Vulkan loader and MoltenVK
# from the LunarG Vulkan SDK ($VULKAN_SDK) or Homebrew (brew install vulkan-loader molten-vk), and
# a runtime hook (packaging/pyinstaller/rthook_vulkan.py) points the loader at the bundled ICD.
set -euo pipefail
cd "$(dirname "$0")/../.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -n 1)
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -e '.[gui,packaging,video,sfm,mesh]'

# the Vulkan loader and MoltenVK, found in the SDK or Homebrew
find_lib() {
  for d in "${VULKAN_SDK:-/nonexistent}/lib" /opt/homebrew/lib /usr/local/lib; do
    [ -f "$d/$1" ] && { echo "$d/$1"; return; }
  done
  echo "error: $1 not found: install the LunarG Vulkan SDK (set VULKAN_SDK) or brew install vulkan-loader molten-vk" >&2
  exit 1
}
loader=$(find_lib libvulkan.1.dylib)
moltenvk=$(find_lib libMoltenVK.dylib)
mkdir -p build/packaging/vulkan/icd.d
cp "$loader" "$moltenvk" build/packaging/vulkan/
cat > build/packaging/vulkan/icd.d/MoltenVK_icd.json <<'JSON'
{ "file_format_version": "1.0.0",
  "ICD": { "library_path": "../libMoltenVK.dylib", "api_version": "1.2.0", "is_portability_driver": true } }
JSON

SPIRULA_MACOS_VULKAN=build/packaging/vulkan .venv/bin/python -m PyInstaller packaging/pyinstaller/spirula.spec \
    --distpath build/packaging/dist --workpath build/packaging/work --noconfirm --log-level WARN
app="build/packaging/dist/Spirula Studio.app"
# the bundle must pass its own self-test before it is wrapped
"$app/Contents/MacOS/spirula" --selftest
# ad-hoc signature (Apple silicon refuses unsigned code); a release signs with a Developer ID
# and notarizes: codesign --deep --options runtime -s "Developer ID Application: ..." + xcrun notarytool
codesign --force --deep --sign - "$app"
mkdir -p dist
dmg="dist/SpirulaStudio-$version-$(uname -m).dmg"
stage=$(mktemp -d)
cp -R "$app" "$stage/"
ln -s /Applications "$stage/Applications"
hdiutil create -volname "Spirula Studio" -srcfolder "$stage" -ov -format UDZO "$dmg"
rm -rf "$stage"
ls -l "$dmg"
