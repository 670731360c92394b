"""MCP servers written with the SDK (``demo.py``, or a copy of it a test made) started in
milliseconds instead of a second: a fork server imports the SDK's server side, most of a
start's time, once per test process, and forks a copy of itself to run each server script.
What a client runs is this script, which hands that copy its stdin, stdout and stderr,
environment, working folder and arguments, and stands for it until it ends.

    python forked.py SOCKET SCRIPT [ARGS]   python SCRIPT ARGS, forked (what a client runs)
    python forked.py --serve SOCKET         the fork server (``mcp_support`` starts it)

To the client it is ``python SCRIPT ARGS``: the script runs as ``__main__`` from its own
text, the copy speaks on the pipes the client made, its exit status (or the signal that
ended it) becomes this process's, a signal sent to this process (the SDK's SIGTERM to a
server that does not leave) is passed on to it, and if this process is killed outright the
copy is killed too. This process ends only once the copy is gone and reaped. Linux only
(``os.pidfd_open``); elsewhere ``mcp_support`` runs the script with python.
"""

from __future__ import annotations

import json
import os
import runpy
import select
import signal
import socket
import struct
import sys
import traceback
from typing import Any, NoReturn

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
STATUS = struct.Struct("!i")  # os.waitpid's status, from the relay to the launcher
LENGTH = struct.Struct("!I")  # the request's length, sent with the three descriptors


def receive_exactly(conn: socket.socket, size: int) -> bytes:
    """``size`` bytes from ``conn`` (fewer when it closes first)."""
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


# ---------------------------------------------------------------------- the launcher (what a client runs)


def launch(socket_path: str, args: list[str]) -> NoReturn:
    """Have the fork server run ``args`` (a script and its arguments) on this process's
    stdio, then stand for that copy: pass signals on, and end as it ended."""
    request = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX)
    try:
        conn.connect(socket_path)
    except OSError as exc:
        print(f"forked: no fork server at {socket_path}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    socket.send_fds(conn, [LENGTH.pack(len(request))], [0, 1, 2])
    conn.sendall(request)
    # The copy holds the pipes now; ours would keep them open after it ends.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def forward(signum: int, _frame: Any) -> None:
        try:
            conn.send(bytes([signum]))
        except OSError:
            pass  # the relay is gone: so is the copy

    for signum in FORWARDED:
        signal.signal(signum, forward)
    status = receive_exactly(conn, STATUS.size)
    if len(status) < STATUS.size:
        os._exit(1)  # the relay is gone (the fork server ended)
    code = os.waitstatus_to_exitcode(STATUS.unpack(status)[0])
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


# ---------------------------------------------------------------------- the fork server


def serve(socket_path: str) -> None:
    """Import the SDK's server side, say ``ready`` on stdout, then fork a relay for each
    launcher that connects, until stdin closes (the test process ended); then end every
    copy with it."""
    import mcp.server.mcpserver  # noqa: F401  (what a server script imports first)
    import mcp.types  # noqa: F401
    import uvicorn  # noqa: F401  (a server over HTTP imports it as it starts)

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(socket_path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, 0], [], [], 1.0)
        if 0 in readable and not os.read(0, 1):
            break
        if listener in readable:
            conn, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                try:
                    relay(conn)
                finally:
                    os._exit(0)
            conn.close()
        reap_relays()
    os.killpg(0, signal.SIGKILL)  # its own process group (mcp_support starts it in a session of its own)


def reap_relays() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def relay(conn: socket.socket) -> None:
    """Fork the copy for one launcher, pass the launcher's signals on to it, and send back
    how it ended (or kill it when the launcher is gone)."""
    header, fds, _, _ = socket.recv_fds(conn, LENGTH.size, 3)
    header += receive_exactly(conn, LENGTH.size - len(header))
    request = json.loads(receive_exactly(conn, LENGTH.unpack(header)[0]))
    pid = os.fork()
    if pid == 0:
        conn.close()
        become(request, fds)
    for fd in fds:
        os.close(fd)
    ended = os.pidfd_open(pid)
    while True:
        readable, _, _ = select.select([conn, ended], [], [])
        if ended in readable:
            _, status = os.waitpid(pid, 0)
            conn.sendall(STATUS.pack(status))
            return
        signum = conn.recv(1)
        os.kill(pid, signum[0] if signum else signal.SIGKILL)
        if not signum:  # the launcher was killed
            os.waitpid(pid, 0)
            return


def become(request: dict[str, Any], fds: list[int]) -> NoReturn:
    """In the forked copy: take the launcher's stdio, environment, folder and arguments, and
    run the script as ``python SCRIPT ARGS`` would."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        script, *_ = sys.argv = request["args"]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2])
    else:
        launch(sys.argv[1], sys.argv[2:])
