"""Real small or read-only file systems for tests of a full disk and unwritable paths.

A tmpfs is mounted (``mount -t tmpfs``: root with CAP_SYS_ADMIN, as CI on a machine like the
development one); where mounting is not permitted the test is skipped, or fails under
``PHILLY_STRICT_SKIPS=1``. Permissions alone cannot make a path unwritable for root (root
ignores chmod), a read-only mount can.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import skip_unless_strict


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, check=False)


@contextmanager
def tmpfs(path: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``path`` (created) for the block; unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        skip_unless_strict("no `mount` command: cannot make a small file system")
    r = _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path))
    if r.returncode != 0:
        skip_unless_strict(f"cannot mount a tmpfs here (root needed): {r.stderr.strip()}")
    try:
        yield path
    finally:
        # Lazy: a file still open (a leaked handle) must not keep the mount behind.
        _run("umount", "-l", str(path))


def remount_read_only(path: Path) -> None:
    """Make the tmpfs at ``path`` read-only (its contents stay)."""
    r = _run("mount", "-o", "remount,ro", str(path))
    if r.returncode != 0:
        skip_unless_strict(f"cannot remount {path} read-only: {r.stderr.strip()}")
    probe = path / ".probe"
    try:
        probe.touch()
    except OSError:
        return
    probe.unlink()
    skip_unless_strict(f"{path} is still writable after a read-only remount")


def fill(path: Path, leave_bytes: int) -> Path:
    """Fill the file system of ``path`` up to ``leave_bytes`` free with one file; returns it."""
    filler = path / "filler"
    free = os.statvfs(path).f_bavail * os.statvfs(path).f_frsize
    with open(filler, "wb") as f:
        remaining = max(free - leave_bytes, 0)
        chunk = b"\0" * (1 << 20)
        while remaining > 0:
            remaining -= f.write(chunk[: min(remaining, len(chunk))])
    return filler


#: Runs a command as root without the capabilities that let root ignore file permissions:
#: what an unprivileged user meets (CI runs as root; a user does not).
UNPRIVILEGED = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def unprivileged(args: list[str], probe: Path) -> subprocess.CompletedProcess:
    """Run ``args`` under ``UNPRIVILEGED``; ``probe`` (a file made unreadable) checks that the
    permissions do apply, else the test is skipped (or fails under strict skips)."""
    if shutil.which("setpriv") is None:
        skip_unless_strict("no `setpriv` command: cannot drop root's file-permission bypass")
    check = _run(*UNPRIVILEGED, "cat", str(probe))
    if check.returncode == 0:
        skip_unless_strict("permissions do not apply here, even without CAP_DAC_OVERRIDE")
    return subprocess.run([*UNPRIVILEGED, *args], capture_output=True, text=True, check=False)
