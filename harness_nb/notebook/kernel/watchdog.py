"""Stopping ``run_python`` at its time limit as the stop button stops a cell: ``Watchdog``.

``run_python`` runs the model's code on the kernel's main thread, which is also the event
loop's: while the code runs nothing else does, so an ``asyncio`` timeout cannot fire and
ipykernel's own SIGINT handler for a running ``%%agent`` cell (which only schedules the
cell's cancellation on the loop) cannot stop it either. So for the length of the code a
``Watchdog`` installs its own SIGINT handler, and a thread of its own sends SIGINT to the
main thread once the limit has passed — a real signal, so a blocking ``time.sleep`` or
``select`` is woken as well as a busy loop. The handler then raises, inside the code, a
``KeyboardInterrupt``, as the stop button does in an ordinary cell:

- ``TimedOut`` for the watchdog's own signal; ``run_python`` reports the timeout;
- ``Stopped`` for the person's stop button: the signal is first passed on to the handler
  it displaced (ipykernel's, which cancels the cell once the loop runs again), so the run
  ends as interrupted, promptly instead of after the code;
- with Python's default handler displaced (no kernel cell), a plain ``KeyboardInterrupt``.

Code that catches the interrupt and goes on is interrupted again every ``REPEAT`` seconds.

Code stuck in C — a regular expression backtracking, ``sum(range(10**11))``, a long call into
a C library — never returns to the interpreter, so no handler runs and nothing inside the
process can stop it. When ``STUCK_AFTER`` interrupts in a row go unanswered, the watchdog
says so once through ``tell`` (``run_python``: the cell's stderr): the person can restart the
kernel; ``stuck_for`` keeps how long, for the model's tool result once the code ends. C code
that releases the interpreter lock (``hashlib``, most of numpy) leaves the watchdog's thread
running, so the person is told while it runs; C code that holds the lock (``re``, ``sum``)
freezes every thread, the watchdog's and ipykernel's own output thread included, so no one
can be told until it ends: ``stuck_for`` is then worked out afterwards, from how late the
watchdog's thread woke or how long its interrupt waited.
Only while ``armed`` (around the ``exec``) does the handler raise: a signal landing in the
harness's own code before or after is absorbed, and ``__exit__`` waits for a signal the
thread sent to be handled before the displaced handler is put back, so no late signal
cancels the cell. Off the main thread (signals only reach handlers there) the watchdog does
nothing and the code runs unbounded.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any

__all__ = ["REPEAT", "STUCK_AFTER", "Stopped", "TimedOut", "Watchdog", "stuck_message"]

REPEAT = 1.0  # seconds between interrupts of code that swallows them
STUCK_AFTER = 3  # unanswered interrupts in a row that mean the code is stuck in C
_SETTLE = 1.0  # most seconds __exit__ waits for a signal already sent to arrive


class TimedOut(KeyboardInterrupt):
    """Raised in the code by the watchdog once its limit has passed."""


class Stopped(KeyboardInterrupt):
    """Raised in the code when the person pressed stop (the kernel was told too)."""


def stuck_message(interrupts: int, seconds: float) -> str:
    """What the person reads when the code has not answered ``interrupts`` interrupts."""
    return (
        f"run_python has ignored {interrupts} interrupts for {seconds:.0f} s: the code is stuck in C code, "
        "which no interrupt stops. Restart the kernel (Kernel ▸ Restart) to stop it (its variables are "
        "lost), or wait for it to end."
    )


class Watchdog:
    """Interrupts the main thread's code after ``seconds`` (see the module doc; ``None``: it
    never does). Use it as ``with Watchdog(s) as dog: … with dog.armed(): exec(…)``;
    ``fired`` says whether the limit passed; ``stuck_for``, how many seconds interrupts went
    unanswered once ``STUCK_AFTER`` of them did (``tell`` is then called once, from the
    watchdog's thread)."""

    def __init__(self, seconds: float | None, *, tell: Callable[[str], None] | None = None) -> None:
        self.seconds = seconds
        self.tell = tell
        self.fired = False
        self.stuck_for: float | None = None
        self._told = False
        self._sent_at = 0.0  # when the oldest unanswered interrupt was sent
        self._armed = False
        self._pending = False  # a signal the thread sent that the handler has not seen yet
        self._active = False
        self._previous: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._main = 0  # the main thread's id, once entered there

    def __enter__(self) -> Watchdog:
        if self.seconds is None or threading.current_thread() is not threading.main_thread():
            return self
        self._main = threading.get_ident()
        self._previous = signal.signal(signal.SIGINT, self._handle)
        self._active = True
        self._thread = threading.Thread(target=self._watch, name="harness_nb-run_python-watchdog", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._active:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()  # it sends under the lock, after checking _stop: no signal comes later
        settle = time.monotonic() + _SETTLE
        while self._pending and time.monotonic() < settle:
            time.sleep(0.001)  # the signal arrives here, disarmed: absorbed
        signal.signal(signal.SIGINT, self._previous)
        self._active = False

    @contextmanager
    def armed(self) -> Iterator[None]:
        """The span in which an interrupt is raised in the running code."""
        self._armed = True
        try:
            yield
        finally:
            self._armed = False

    def _watch(self) -> None:
        wait, unanswered = self.seconds or 0, 0
        while True:
            due = time.monotonic() + wait
            if self._stop.wait(wait):
                return
            frozen = time.monotonic() - due  # C code holding the interpreter lock stopped this thread as long
            if frozen >= STUCK_AFTER * REPEAT:
                self.stuck_for = max(self.stuck_for or 0.0, frozen)
            wait = REPEAT
            with self._lock:
                if self._stop.is_set():
                    return
                if self._pending:
                    unanswered += 1
                else:
                    unanswered, self._sent_at = 0, time.monotonic()
                self.fired = True
                self._pending = True
                signal.pthread_kill(self._main, signal.SIGINT)
            if unanswered >= STUCK_AFTER and not self._told:
                self._told = True
                self.stuck_for = max(self.stuck_for or 0.0, time.monotonic() - self._sent_at)
                self._say(stuck_message(unanswered, self.stuck_for))

    def _say(self, text: str) -> None:
        if self.tell is None:
            return
        try:
            self.tell(text)
        except Exception:  # a closed stream: the tool result still tells the model
            return

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._pending:  # the watchdog's own
            self._pending = False
            waited = time.monotonic() - self._sent_at
            if waited >= STUCK_AFTER * REPEAT:  # the thread may have been frozen as long (module doc)
                self.stuck_for = max(self.stuck_for or 0.0, waited)
            if self._armed:
                raise TimedOut(f"interrupted after {self.seconds} s")
            return
        previous = self._previous
        if previous is signal.default_int_handler:
            raise KeyboardInterrupt
        if callable(previous):
            previous(signum, frame)  # the kernel's: it cancels the cell when the loop runs again
        if self._armed:
            raise Stopped("interrupted by the stop button")
