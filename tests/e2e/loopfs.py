"""A small ext4 file system on a loop device, for tests that fill or nearly fill a disk.

Needs root and mkfs.ext4/losetup/mount; `loop_unavailable_reason()` says why not when the machine
cannot, so the caller can skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: The loop file system: small enough to fill in seconds, big enough for the broker's metadata.
IMAGE_BYTES = 64 << 20
#: Written before the broker starts, deleted when "space returns".
BALLAST_BYTES = 16 << 20


def run(*cmd: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.strip()


class LoopFs:
    """An ext4 image on a loop device, mounted at `mount_dir`."""

    def __init__(self, root: Path):
        self.image = root / "disk.img"
        self.mount_dir = root / "mnt"
        self.device: str | None = None
        self.ballast = self.mount_dir / "ballast"

    def mount(self) -> None:
        self.mount_dir.mkdir()
        with open(self.image, "wb") as f:
            f.truncate(IMAGE_BYTES)
        run("mkfs.ext4", "-q", "-F", "-m", "0", str(self.image))
        self.device = run("losetup", "--find", "--show", str(self.image))
        run("mount", self.device, str(self.mount_dir))

    def put_ballast(self) -> None:
        """Occupy BALLAST_BYTES with real blocks (written, not sparse) and sync them."""
        with open(self.ballast, "wb") as f:
            for _ in range(BALLAST_BYTES >> 20):
                f.write(b"\xba" * (1 << 20))
            f.flush()
            os.fsync(f.fileno())

    def free_ballast(self) -> None:
        """Space returns."""
        self.ballast.unlink()
        os.sync()

    def free_bytes(self) -> int:
        st = os.statvfs(self.mount_dir)
        return st.f_bavail * st.f_frsize

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.mount_dir)], capture_output=True, timeout=60)
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=60)


def loop_unavailable_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to mount a loop device"
    for tool in ("mkfs.ext4", "losetup", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@contextlib.contextmanager
def mounted(root: Path):
    """A mounted LoopFs under `root`, unmounted afterwards; skips the test when this machine
    cannot mount one."""
    reason = loop_unavailable_reason()
    if reason:
        pytest.skip(reason)
    fs = LoopFs(root)
    try:
        fs.mount()
    except (RuntimeError, OSError) as e:
        fs.unmount()
        pytest.skip(f"this machine cannot mount a loop device: {e}")
    try:
        yield fs
    finally:
        fs.unmount()
