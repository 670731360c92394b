"""The kernel's side of the root helper (``helper_program.py``): one per kernel process,
started on the first sandboxed command that needs it, stopped with the kernel.

``mount_helper()`` gives the running helper (starting it when there is none or it died);
its ``prepare`` sends one request and waits for the answer (blocking: call it off the event
loop): the working directory's own namespace, as the path a command enters it by
(``nsenter --mount=…``), and what the sandbox uid sees there. ``stop_mount_helper()`` ends
it: ``kill_running_commands`` calls it at exit and when the extension is unloaded.

The helper dies with the kernel however the kernel ends: it exits at end of input (the
kernel's end of its stdin pipe closes with the kernel), and it asked the kernel to kill it
on its parent's death (``PR_SET_PDEATHSIG``; started from one of harness_nb's worker threads,
which live as long as the process). Nothing inside a sandbox can reach it: it runs outside
every sandbox's pid namespace, and only the kernel holds its pipes.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HELPER_TIMEOUT", "HelperError", "MountHelper", "Prepared", "mount_helper", "stop_mount_helper"]

HELPER_TIMEOUT = 30.0
"""Seconds the helper may take to start or to answer one request."""

PROGRAM = Path(__file__).with_name("helper_program.py")


class HelperError(Exception):
    """The helper could not do what was asked (the message says what): ``stage`` is where
    (``"helper"``: it did not start or answer; ``"reach"``, ``"idmap"``: preparing a view)."""

    def __init__(self, message: str, *, stage: str = "helper") -> None:
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class Prepared:
    """A working directory's view, ready: ``namespace`` is the path a command enters it by,
    ``visible`` which of the paths asked about the sandbox uid sees there."""

    namespace: str
    visible: list[bool]


class MountHelper:
    """One running helper process for sandbox uid ``uid`` (see the module doc)."""

    def __init__(self, uid: int) -> None:
        self.uid = uid
        # every workdir the view was asked to idmap: each stays mapped for the helper's life
        self.workdirs: list[str] = []
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-S", str(PROGRAM), str(uid), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env={"PATH": os.defpath, "LC_ALL": "C.UTF-8"},
        )
        try:
            answer = self._read()
        except HelperError:
            self.stop()
            raise
        if "ready" not in answer:
            self.stop()
            raise HelperError(f"the root helper could not start: {answer.get('error', answer)}")

    @property
    def alive(self) -> bool:
        """Whether the process still runs (it is not reaped: its pid stays ours)."""
        try:
            return os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
        except ChildProcessError:
            return False

    def prepare(
        self, *, cover: Sequence[str], reach: Sequence[str], workdir: str | None, check: Sequence[str] = ()
    ) -> Prepared:
        """In ``workdir``'s own namespace (``None``: one without a workdir): cover ``cover``,
        make ``reach`` reachable, idmap ``workdir``, and see which of ``check`` the sandbox
        uid can see; ``HelperError`` (its ``stage``) when that cannot be done."""
        request: dict[str, Any] = {
            "op": "prepare", "cover": list(cover), "reach": list(reach), "workdir": workdir, "check": list(check),
        }  # fmt: skip
        if workdir is not None:
            st = os.stat(workdir)
            request["inode"] = [st.st_dev, st.st_ino]
            if workdir not in self.workdirs:
                self.workdirs.append(workdir)
        answer = self._ask(request)
        if not answer.get("ok"):
            raise HelperError(str(answer.get("error", answer)), stage=str(answer.get("stage", "reach")))
        namespace, seen = answer.get("namespace"), answer.get("visible")
        if not isinstance(namespace, str) or not isinstance(seen, list) or len(seen) != len(check):
            raise HelperError(f"the root helper answered {answer!r}")
        return Prepared(namespace, [bool(s) for s in seen])

    def stop(self) -> None:
        """End the helper (closing its input; killing it if it lingers) and reap it."""
        with self._lock:
            for pipe in (self._proc.stdin, self._proc.stdout):
                if pipe is not None:
                    pipe.close()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            stdin = self._proc.stdin
            assert stdin is not None
            try:
                stdin.write(json.dumps(request).encode() + b"\n")
                stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                raise HelperError("the root helper has exited") from exc
            return self._read()

    def _read(self) -> dict[str, Any]:
        stdout = self._proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], HELPER_TIMEOUT)
        if not ready:
            self._proc.kill()
            raise HelperError(f"the root helper did not answer within {HELPER_TIMEOUT:g} s and was stopped")
        line = stdout.readline()
        if not line:
            raise HelperError("the root helper has exited")
        try:
            answer = json.loads(line)
        except ValueError as exc:
            raise HelperError(f"the root helper answered {line[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise HelperError(f"the root helper answered {line[:200]!r}")
        return answer


_helper: MountHelper | None = None
_helper_lock = threading.Lock()


def mount_helper(uid: int) -> MountHelper:
    """This process's helper for ``uid``, started now if none runs (``HelperError`` when it
    cannot start). Blocking."""
    global _helper
    with _helper_lock:
        if _helper is not None and (not _helper.alive or _helper.uid != uid):
            _helper.stop()
            _helper = None
        if _helper is None:
            _helper = MountHelper(uid)
        return _helper


def stop_mount_helper() -> bool:
    """Stop this process's helper; whether one was running."""
    global _helper
    with _helper_lock:
        helper, _helper = _helper, None
    if helper is None:
        return False
    helper.stop()
    return True
