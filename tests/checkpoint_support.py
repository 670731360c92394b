"""Shared pieces of the checkpoint tests: a workdir's state read back byte for byte, and a
data folder worth destroying."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

LEFT_OUT = (".harness_nb",)


def state(folder: Path, *, left_out: tuple[str, ...] = LEFT_OUT) -> dict[str, tuple[object, ...]]:
    """Every path under ``folder`` (but ``left_out`` top-level names) as what it is: a file's
    bytes and permission bits, a symlink's target, a folder's bits, a pipe's kind."""
    found: dict[str, tuple[object, ...]] = {}
    for root, dirs, files in os.walk(folder):
        rel_root = os.path.relpath(root, folder)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in left_out]
            files = [f for f in files if f not in left_out]
        for name in [*dirs, *files]:
            path = Path(root, name)
            rel = os.path.normpath(os.path.join(rel_root, name))
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", stat.S_IMODE(st.st_mode))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode))
            else:
                found[rel] = ("special", stat.S_IFMT(st.st_mode))
    return found


def plant_data(workdir: Path) -> None:
    """``data/``: a CSV, a binary file, a private file, an executable, a symlink and a
    nested folder — what a rewind must bring back exactly."""
    data = workdir / "data"
    (data / "raw").mkdir(parents=True)
    (data / "keep.csv").write_bytes(b"id,value\n1,3.5\n2,\xe2\x82\xac 7\n")
    (data / "raw" / "a.bin").write_bytes(bytes(range(256)) * 40)
    (data / "raw" / "notes.txt").write_text("measured on tuesday\n")
    secret = data / "private.txt"
    secret.write_text("mine\n")
    secret.chmod(0o600)
    script = data / "run.sh"
    script.write_text("#!/bin/sh\necho run\n")
    script.chmod(0o755)
    (data / "latest.csv").symlink_to("keep.csv")


def git(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """git, as a person would run it (no user config needed)."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
