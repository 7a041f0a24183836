"""scripts/setup.sh waits for the package manager's lock instead of failing at once (issue
49): every apt-get goes through apt_get (scripts/apt_wait.sh), which passes apt's own
`-o DPkg::Lock::Timeout=300` and, while another process holds a lock, says so once and
waits. On dfa6aa5 setup.sh called apt-get bare (it fails at once on a held lock)."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_apt_get_of_setup_waits_for_the_lock():
    text = (REPO / "scripts" / "setup.sh").read_text()
    calls = [line for line in text.splitlines()
             if re.search(r"\bapt(-|_)get (update|install)\b", line) and not line.lstrip().startswith("#")
             and "echo" not in line]
    assert calls, "no apt call found in setup.sh"
    bare = [line for line in calls if re.search(r"\bapt-get (update|install)", line)]
    assert not bare, f"apt-get without the lock wait: {bare}"
    assert ". scripts/apt_wait.sh" in text
    helper = (REPO / "scripts" / "apt_wait.sh").read_text()
    assert 'apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" "$@"' in helper
    assert "SPIRULA_APT_LOCK_TIMEOUT:-300" in helper


def test_apt_get_says_once_that_it_waits_and_runs_once_the_lock_is_free(tmp_path):
    """A fake apt-get on PATH; the test holds a POSIX lock on a lock file as dpkg would,
    sees the one waiting line, lets go, and the call goes through with apt's timeout."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text("#!/bin/sh\necho \"apt-get $*\"\n")
    (fake / "apt-get").chmod(0o755)
    lock = tmp_path / "lock-frontend"
    lock.write_text("")
    fd = os.open(lock, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SPIRULA_APT_LOCKS=str(lock),
               SPIRULA_APT_LOCK_TIMEOUT="300")
    proc = subprocess.Popen(["bash", "-c", ". scripts/apt_wait.sh && apt_get install -y foo"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # blocks until the script says it waits
        assert "holds the package manager's lock" in first and "up to 300 s" in first
        os.close(fd)  # the other process is done
        fd = None
        out, err = proc.communicate(timeout=120)
    finally:
        if fd is not None:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert out.strip() == "apt-get -o DPkg::Lock::Timeout=300 install -y foo"
    assert "waiting" not in err  # said once


def test_apt_get_without_a_held_lock_says_nothing(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "apt-get").write_text("#!/bin/sh\necho \"apt-get $*\"\n")
    (fake / "apt-get").chmod(0o755)
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}", SPIRULA_APT_LOCKS=str(tmp_path / "none"))
    r = subprocess.run(["bash", "-c", ". scripts/apt_wait.sh && apt_get update -qq"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == ""
    assert r.stdout.strip() == "apt-get -o DPkg::Lock::Timeout=300 update -qq"
