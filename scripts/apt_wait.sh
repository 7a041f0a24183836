# Sourced by scripts/setup.sh: `apt_get ARGS...` runs apt-get so that it waits for the
# package manager's lock (a fresh machine's unattended upgrades hold it for minutes)
# instead of failing at once. apt's own wait, `-o DPkg::Lock::Timeout=N` (apt >= 1.9.11),
# covers dpkg's locks; the package lists' lock, which `apt-get update` takes, is waited for
# here. Says once that it waits. SPIRULA_APT_LOCK_TIMEOUT: the longest wait, seconds
# (default 300); SPIRULA_APT_LOCKS: the lock files looked at (default apt's and dpkg's).
APT_LOCK_TIMEOUT=${SPIRULA_APT_LOCK_TIMEOUT:-300}
read -r -a APT_LOCKS <<< "${SPIRULA_APT_LOCKS:-/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}"

# true when another process holds one of these lock files (POSIX record locks, as apt and dpkg take them)
apt_lock_held() {
  "${PY:-python3}" - "$@" <<'PY' 2>/dev/null
import fcntl, os, sys
for path in sys.argv[1:]:
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        continue
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(0)
    finally:
        os.close(fd)
sys.exit(1)
PY
}

apt_get() {
  if apt_lock_held "${APT_LOCKS[@]}"; then
    echo "[setup] another process holds the package manager's lock (unattended upgrades?): waiting for it, up to ${APT_LOCK_TIMEOUT} s" >&2
    local start=$SECONDS
    while apt_lock_held "${APT_LOCKS[@]}" && [ $((SECONDS - start)) -lt "$APT_LOCK_TIMEOUT" ]; do sleep 1; done
  fi
  apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@"
}
