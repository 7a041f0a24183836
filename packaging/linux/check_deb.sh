#!/usr/bin/env bash
# Check a built .deb the way a user meets it (run by `make package`):
#  1. its control fields and files (binary, menu entry, MIME type, icons, licences);
#  2. apt can satisfy its Depends on this system (`apt-get install --simulate`, nothing installed);
#  3. unpacked into a clean temporary root (dpkg -x), the installed `spirula --selftest` runs
#     headless (no display), on software Vulkan (lavapipe), with an empty environment: no Python
#     on PATH, a fresh HOME (cold shader caches, as on a user's first run); it must PASS;
#  4. the installed studio window starts under Xvfb and is still up after 40 s (when Xvfb is here).
# Prints the package size and the self-test time, and writes them to build/packaging/report.txt.
set -euo pipefail
deb=$(readlink -f "${1:?usage: packaging/linux/check_deb.sh dist/spirula-studio_VERSION_ARCH.deb}")
[ -f "$deb" ] || { echo "[check] $deb not found: build it first (make deb)" >&2; exit 1; }
cd "$(dirname "$0")/../.."
report=build/packaging/report.txt
mkdir -p build/packaging
root=$(mktemp -d /tmp/spirula-deb-check.XXXXXX)
trap 'rm -rf "$root"' EXIT
fail() { echo "[check] FAIL: $*" >&2; exit 1; }

# 1. metadata and contents
dpkg-deb --field "$deb" Package Version Architecture Installed-Size Depends Recommends > "$root/fields"
grep -q '^Depends:.*libvulkan1' "$root/fields" || fail "Depends does not name a Vulkan loader (libvulkan1)"
grep -q '^Recommends:.*mesa-vulkan-drivers' "$root/fields" || fail "Recommends does not name mesa-vulkan-drivers"
dpkg-deb --contents "$deb" | awk '{print $6}' > "$root/contents"
for f in ./opt/spirula-studio/spirula ./usr/bin/spirula ./usr/share/applications/spirula-studio.desktop \
         ./usr/share/mime/packages/spirula-studio.xml ./usr/share/icons/hicolor/scalable/apps/spirula-studio.svg \
         ./usr/share/icons/hicolor/256x256/apps/spirula-studio.png ./usr/share/doc/spirula-studio/copyright \
         ./opt/spirula-studio/_internal/resources/sample/fox/LICENSE.txt \
         ./opt/spirula-studio/_internal/resources/sample/fox/transforms.json; do
  grep -qx "$f" "$root/contents" || fail "the package lacks $f"
done
grep -q '^./opt/spirula-studio/_internal/spirula_shaders/raster/.*\.slang$' "$root/contents" || fail "no Slang kernels"
grep -q '^./opt/spirula-studio/_internal/libpython3' "$root/contents" || fail "Python is not bundled"
echo "[check] contents ok: binary, menu entry, MIME type, icons, licences, kernels, Python"

# 2. Depends satisfiable here (simulation only)
if command -v apt-get >/dev/null; then
  apt-get install --simulate "$deb" > "$root/apt.log" 2>&1 || { cat "$root/apt.log" >&2; fail "apt cannot install the package"; }
  grep -q '^Inst spirula-studio' "$root/apt.log" || { cat "$root/apt.log" >&2; fail "apt would not install it"; }
  echo "[check] apt-get install --simulate: dependencies satisfiable"
fi

# 3. unpack into a clean root, run the installed self-test headless on software Vulkan
dpkg -x "$deb" "$root/fs"
if command -v desktop-file-validate >/dev/null; then
  desktop-file-validate "$root/fs/usr/share/applications/spirula-studio.desktop" || fail "invalid desktop entry"
fi
mkdir -p "$root/home" "$root/emptybin"
icd=""
for f in /usr/share/vulkan/icd.d/lvp_icd*.json; do [ -f "$f" ] && icd=$f; done
[ -n "$icd" ] || echo "[check] note: no lavapipe ICD found; the self-test uses whatever Vulkan driver is installed"
echo "[check] running the installed spirula --selftest (env -i: no DISPLAY, nothing on PATH, fresh HOME${icd:+, $icd})"
t0=$(date +%s.%N)
set +e
env -i HOME="$root/home" PATH="$root/emptybin" LANG=C.UTF-8 ${icd:+VK_ICD_FILENAMES=$icd} \
  "$root/fs/usr/bin/spirula" --selftest 2>&1 | tee "$root/selftest.log"
rc=${PIPESTATUS[0]}
set -e
t1=$(date +%s.%N)
selftest_s=$(python3 -c "print(f'{$t1 - $t0:.1f}')" 2>/dev/null || echo "$t1 - $t0" | bc)
[ "$rc" = 0 ] || fail "the installed self-test exited with $rc: $(tail -1 "$root/selftest.log")"
tail -1 "$root/selftest.log" | grep -q '^PASS' || fail "no PASS line"
grep -q '(frozen bundle)' "$root/selftest.log" || fail "the self-test did not run from the frozen bundle"

# 4. the window starts (Xvfb), stays up for 40 s without a traceback
gui="skipped (no xvfb-run)"
if command -v xvfb-run >/dev/null; then
  set +e
  xvfb-run -a -s "-screen 0 1280x800x24" timeout 40 env HOME="$root/home" PATH="$root/emptybin" LANG=C.UTF-8 \
    ${icd:+VK_ICD_FILENAMES=$icd} "$root/fs/usr/bin/spirula" gui > "$root/gui.log" 2>&1
  grc=$?
  set -e
  if [ "$grc" = 124 ] && ! grep -q Traceback "$root/gui.log"; then
    gui="ok (up for 40 s under Xvfb)"
  else
    cat "$root/gui.log" >&2
    fail "the installed studio window exited with $grc within 40 s"
  fi
fi
echo "[check] studio window: $gui"

size=$(stat -c %s "$deb")
inst=$(sed -n 's/^Installed-Size: //p' "$root/fields")
{
  echo "package:        $(basename "$deb")"
  echo "package size:   $size bytes ($(python3 -c "print(f'{$size / 2**20:.1f}')" 2>/dev/null) MiB)"
  echo "installed size: $inst KiB ($((inst / 1024)) MiB)"
  echo "selftest:       PASS in $selftest_s s (installed, headless, software Vulkan, cold caches)"
  echo "selftest line:  $(grep '^\[ok\] train' "$root/selftest.log" | sed 's/  */ /g')"
  echo "studio window:  $gui"
  echo "date:           $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) cores"
} | tee "$report"
echo "[check] PASS"
