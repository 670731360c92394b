"""A real Jupyter frontend in headless Chromium, for the browser tests.

``JupyterServer(kind="lab")`` runs JupyterLab (``python -m jupyterlab``) and
``kind="notebook"`` runs Notebook 7 (``python -m notebook``); both on 127.0.0.1 with a
token, this interpreter as the ``python3`` kernel, and private Jupyter folders, so nothing
the developer has configured leaks in. ``notebook_in_browser`` serves a tutorial with its
outputs cleared, opens it in Debian's chromium (never a browser downloaded by Playwright)
and yields a ``NotebookPage``: cells by position, run one and wait for it, screenshots into
``test-artifacts/browser/<frontend>-<theme>/``. ``theme="dark"`` opens the page in the
JupyterLab Dark theme (both frontends read it from the same user setting).

Readiness follows the pitfalls in the browser notes: the toolbar's indicator says idle
before any kernel exists (and a Shift+Enter then is dropped), so each frontend waits for a
signal that names a connected kernel; a cell is finished when its prompt goes from ``[*]:``
to ``[n]:`` (kernel idle flips on comm traffic alone).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROME_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
KERNEL_NAME = "Python 3 (ipykernel)"
DONE_PROMPT = re.compile(r"^\[\d+\]:$")
Frontend = Literal["lab", "notebook"]
FRONTENDS: tuple[Frontend, ...] = ("lab", "notebook")
Theme = Literal["light", "dark"]
THEMES: dict[Theme, str] = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# A cell of a test's own notebook: a code cell's source, or (cell type, source).
CellSpec = str | tuple[Literal["code", "markdown"], str]


def _cell(n: int, spec: CellSpec) -> dict[str, Any]:
    kind, source = ("code", spec) if isinstance(spec, str) else spec
    cell: dict[str, Any] = {"cell_type": kind, "id": f"cell-{n}", "metadata": {}, "source": source}
    return {**cell, "outputs": [], "execution_count": None} if kind == "code" else cell


def write_notebook(
    name: str, root: Path, cells: Sequence[CellSpec], *, files: Mapping[str, str] | None = None
) -> Path:
    """A notebook of the test's own: NAME in ROOT with one cell per item of CELLS (code
    cells, no outputs, ids ``cell-<position>``), and FILES (relative path → text, its
    scripts and agent files) beside it."""
    nb = {
        "cells": [_cell(n, spec) for n, spec in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": KERNEL_NAME, "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for relative, text in (files or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    target = root / name
    target.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return target


def copy_notebook(
    name: str, root: Path, *, folders: Sequence[str] = ("scripts",), append: Sequence[str] = ()
) -> Path:
    """notebooks/NAME without its saved outputs (so every output a test sees was produced
    now), with the folders it reads (its scripts, its project) beside it, and the code cells
    ``append`` (a test's own checks, run in the page like the rest) at its end."""
    nb = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    for n, source in enumerate(append):
        cell = {"cell_type": "code", "id": f"browser-test-{n}", "metadata": {}, "source": source}
        nb["cells"].append({**cell, "outputs": [], "execution_count": None})
    target = root / name
    target.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    for folder in folders:
        shutil.copytree(NOTEBOOKS / folder, root / folder)
    return target


def _settings(config_dir: Path, plugin: str, values: dict[str, Any]) -> None:
    path = config_dir / "lab" / "user-settings" / plugin
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))


class JupyterServer:
    """JupyterLab or Notebook 7 in its own process group, with private Jupyter folders."""

    def __init__(self, tmp: Path, root: Path, *, kind: Frontend, theme: Theme = "light") -> None:
        self.kind: Frontend = kind
        self.theme: Theme = theme
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        config, data = tmp / "jupyter-config", tmp / "jupyter-data"
        config.mkdir()
        # No news or update checks (no network here), and no toast asking about them. Both
        # servers load jupyterlab's server extension, which serves the news: configure it in
        # the file every Jupyter server reads.
        (config / "jupyter_server_config.py").write_text(
            "c.LabApp.news_url = None\n"
            "c.LabApp.check_for_updates_class = 'jupyterlab.handlers.announcements.NeverCheckForUpdate'\n"
        )
        # Notebook 7 is built from JupyterLab's plugins and reads the same user settings
        # (JUPYTER_CONFIG_DIR/lab/user-settings), under the same @jupyterlab plugin ids.
        _settings(
            config,
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )
        # Notebook 7 takes its theme from the same plugin id as Lab.
        _settings(config, "@jupyterlab/apputils-extension/themes.jupyterlab-settings", {"theme": THEMES[theme]})
        # Saved only when a test presses Ctrl+S: what a reload finds is what the test saved.
        _settings(config, "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings", {"autosave": False})
        # Every cell in the DOM, so locators by position see cells scrolled out of view.
        _settings(config, "@jupyterlab/notebook-extension/tracker.jupyterlab-settings", {"windowingMode": "none"})
        # The notebook names the "python3" kernelspec: make it this interpreter.
        spec = data / "kernels" / "python3"
        spec.mkdir(parents=True)
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": KERNEL_NAME, "language": "python"}))
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(data),
            "JUPYTER_RUNTIME_DIR": str(tmp / "jupyter-runtime"),
            "IPYTHONDIR": str(tmp / "ipython"),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        for name in ("HARNESS_NB_MODEL", "HARNESS_NB_APPROVAL_POLICY", "HARNESS_NB_UNATTENDED_APPROVALS"):
            env.pop(name, None)
        module = "jupyterlab" if kind == "lab" else "notebook"
        cmd = [
            sys.executable, "-m", module, "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
        ]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # Jupyter refuses to run as root otherwise (CI runs as root)
        self.log_path = tmp / "server.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, notebook: str) -> str:
        """The page that opens NOTEBOOK. Lab's ``?reset`` ignores a saved layout; Notebook 7
        shows one document per page and has no layouts to reset."""
        if self.kind == "lab":
            return f"{self.base}/lab/tree/{notebook}?reset&token={self.token}"
        return f"{self.base}/notebooks/{notebook}?token={self.token}"

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.kind} exited with {self.proc.returncode}:\n{self._log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"jupyter {self.kind} did not answer in {timeout:g} s:\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log_path.read_text()[-3000:]

    def wait_for_connected_kernel(self, timeout: float = 60, *, idle: bool = True) -> None:
        """Until a kernel has a client connected (a page's websocket) and is idle (or, if
        not ``idle``, in any state)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            kernels = self.kernels(starting_ok=True)
            if any(k.get("connections", 0) > 0 and (not idle or k.get("execution_state") == "idle") for k in kernels):
                return
            time.sleep(0.2)
        raise RuntimeError(f"no kernel connected in {timeout:g} s: {kernels}\n{self._log_tail()}")

    def kernels(self, *, starting_ok: bool = False) -> list[dict[str, Any]]:
        """The server's kernels. ``starting_ok``: an HTTP 500 reads as "none yet" —
        jupyter_server 2.21 answers 500 while a kernel it is starting has no
        ``last_activity`` yet (its log: "The 'last_activity' trait … expected a datetime")."""
        try:
            with urllib.request.urlopen(f"{self.base}/api/kernels?token={self.token}", timeout=5) as r:
                return list(json.load(r))
        except urllib.error.HTTPError as exc:
            if starting_ok and exc.code == 500:
                return []
            raise

    def shutdown_kernels(self) -> None:
        """Shut every kernel down through the REST API, as Kernel > Shut Down does."""
        for kernel in self.kernels():
            url = f"{self.base}/api/kernels/{kernel['id']}?token={self.token}"
            urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=20).close()

    def stop(self) -> None:
        try:  # shuts the kernels down, then the server
            request = urllib.request.Request(f"{self.base}/api/shutdown?token={self.token}", method="POST", data=b"")
            urllib.request.urlopen(request, timeout=5).close()
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)  # the group this server started
                self.proc.wait(timeout=20)
        finally:
            self._log.close()


def cell_sources(notebook: Path) -> list[tuple[str, str]]:
    """Each cell's (type, source), in order."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list) else c["source"]) for c in cells]


class NotebookPage:
    """One open notebook in either frontend: cells by position, and the waits that work."""

    # Both frontends render the document with JupyterLab's NotebookPanel; Lab keeps hidden
    # panels (other tabs) in the DOM, so only the visible one counts.
    CELLS = ".jp-NotebookPanel:visible .jp-Notebook .jp-Cell"
    CELLS_JS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"  # for page scripts

    def __init__(self, page: Any, server: JupyterServer, notebook: Path, *, artifacts: Path, prefix: str) -> None:
        self.page = page
        self.server = server
        self.artifacts = artifacts
        self.prefix = prefix
        self.notebook = notebook
        self.cells = cell_sources(notebook)

    def open(self, *, kernel_idle: bool = True) -> None:
        """Load (or reload) the notebook's page, in the server's theme, and wait until its
        kernel is connected — and idle, unless ``kernel_idle`` is false (a reload while a
        cell still runs)."""
        from playwright.sync_api import expect

        self.page.goto(self.server.url(self.notebook.name))
        if kernel_idle:
            self.wait_for_kernel()
        else:
            self.page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
            self.server.wait_for_connected_kernel(idle=False)
        light = "false" if self.server.theme == "dark" else "true"
        expect(self.page.locator("body")).to_have_attribute("data-jp-theme-light", light)

    def save(self) -> None:
        """Ctrl+S in command mode, then wait until the file on disk has changed."""
        before = self.notebook.stat().st_mtime_ns
        self.page.locator(self.CELLS).first.locator(".jp-InputPrompt").click()
        self.page.keyboard.press("Control+s")
        deadline = time.monotonic() + 20
        while self.notebook.stat().st_mtime_ns == before:
            assert time.monotonic() < deadline, "Ctrl+S did not save the notebook"
            time.sleep(0.1)
        time.sleep(0.3)  # the write may still be under way

    def index_of(self, fragment: str) -> int:
        """The position of the one code cell whose source contains FRAGMENT."""
        found = [i for i, (kind, source) in enumerate(self.cells) if kind == "code" and fragment in source]
        assert len(found) == 1, f"expected one code cell containing {fragment!r}, found {found}"
        return found[0]

    def cell(self, i: int) -> Any:
        return self.page.locator(self.CELLS).nth(i)

    def prompt(self, i: int) -> Any:
        return self.cell(i).locator(".jp-InputPrompt")

    def value(self, i: int) -> Any:
        """The cell's value (``Out[n]``): the agent's answer, rendered as Markdown."""
        return self.cell(i).locator(".jp-OutputArea-executeResult .jp-RenderedMarkdown")

    def wait_for_kernel(self) -> None:
        """Until the kernel is connected and idle, so the first Shift+Enter is not dropped."""
        from playwright.sync_api import expect

        self.page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
        if self.server.kind == "lab":
            # Not the toolbar's indicator: it says idle before any kernel exists. The status
            # bar names the kernel only once it is connected.
            status = self.page.locator("#jp-main-statusbar .jp-StatusBar-TextItem[title^='Change kernel']")
            expect(status).to_have_text(f"{KERNEL_NAME} | Idle", timeout=60_000)
            return
        # Notebook 7 has no status bar. Its toolbar's indicator says "idle" before any kernel
        # exists, then initializing, connecting, unknown, idle; the kernel name beside it
        # changes from "No Kernel" as the kernel starts. So: first the server's word that
        # the page's websocket is connected (the indicator has left its first "idle" by
        # then), then the page's own idle, under the kernel's name.
        self.server.wait_for_connected_kernel()
        name = self.page.locator("[data-jp-item-name='kernelName'] .jp-ToolbarButtonComponent-label")
        expect(name).to_have_text(KERNEL_NAME, timeout=60_000)
        indicator = self.page.locator(".jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator")
        expect(indicator).to_have_attribute("data-status", "idle", timeout=60_000)

    def start(self, i: int) -> None:
        """Select cell i (command mode) and press Shift+Enter; fail fast if it is dropped."""
        from playwright.sync_api import expect

        self.cell(i).scroll_into_view_if_needed()
        self.prompt(i).click()
        expect(self.cell(i)).to_have_class(re.compile(r"\bjp-mod-selected\b"))
        self.page.keyboard.press("Shift+Enter")
        expect(self.prompt(i)).not_to_have_text("[ ]:", timeout=10_000)

    def finish(self, i: int, timeout: float = 60_000, *, raises: bool = False) -> None:
        """Until cell i's prompt shows its execution count. It must not have written to
        stderr (where both frontends also render a traceback), unless it ``raises``."""
        from playwright.sync_api import expect

        expect(self.prompt(i)).to_have_text(DONE_PROMPT, timeout=timeout)
        if not raises:
            errors = self.cell(i).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            assert errors.count() == 0, f"cell {i} wrote to stderr: {errors.first.inner_text()}"

    def run(self, i: int, timeout: float = 60_000) -> None:
        self.start(i)
        self.finish(i, timeout)

    def text_while_busy(self, i: int, text: str, busy: int, *, within: str = ".jp-OutputArea") -> str:
        """Wait until cell i's WITHIN element shows TEXT, and check that cell BUSY was still
        running then (``[*]:``): what lands in a cell from the background lands at once, not
        when the foreground cell ends. Returns that element's text."""
        seen = self.page.wait_for_function(
            """([selector, i, busy, within, text]) => {
                const cells = [...document.querySelectorAll(selector)];
                const out = cells[i].querySelector(within);
                if (!out || !out.innerText.includes(text)) return false;
                return {text: out.innerText, busyPrompt: cells[busy].querySelector('.jp-InputPrompt').innerText};
            }""",
            arg=[self.CELLS_JS, i, busy, within, text],
            timeout=30_000,
            polling=50,
        ).json_value()
        assert seen["busyPrompt"].strip() == "[*]:", f"{text!r} only appeared after cell {busy} ended: {seen}"
        return str(seen["text"])

    def shot(self, name: str, i: int | None = None) -> None:
        if i is not None:
            self.cell(i).scroll_into_view_if_needed()
        self.page.screenshot(path=str(self.artifacts / f"{self.prefix}{name}.png"))


@contextmanager
def notebook_in_browser(
    tmp: Path,
    name: str,
    *,
    kind: Frontend,
    theme: Theme = "light",
    folders: Sequence[str] = ("scripts",),
    append: Sequence[str] = (),
    cells: Sequence[CellSpec] | None = None,
    files: Mapping[str, str] | None = None,
) -> Iterator[NotebookPage]:
    """notebooks/NAME (as ``copy_notebook`` makes it), or with CELLS a notebook NAME of the
    test's own (``write_notebook``, with FILES beside it), served by KIND in THEME and open
    in headless Chromium, its kernel ready. Artifacts go to
    test-artifacts/browser/KIND-THEME/, named after the notebook: the screenshots a test
    takes, the server's log and the browser console, and on failure a full-page screenshot
    and the page's HTML (STEM-FAILED.*)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed: pip install -e '.[browser]' (never `playwright install`)")

    stem = Path(name).stem
    artifacts = ARTIFACTS / f"{kind}-{theme}"
    artifacts.mkdir(parents=True, exist_ok=True)
    for old in artifacts.glob(f"{stem}-*"):
        old.unlink()
    root = tmp / "root"
    root.mkdir()
    if cells is None:
        notebook = copy_notebook(name, root, folders=folders, append=append)
    else:
        notebook = write_notebook(name, root, cells, files=files)
    server = JupyterServer(tmp, root, kind=kind, theme=theme)
    try:
        server.wait_ready()
        with sync_playwright() as p:
            browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=CHROME_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            console: list[str] = []
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: console.append(f"PAGEERROR: {e}"))
            page.on("dialog", lambda d: d.accept())  # "leave the page?" on a reload with unsaved changes
            try:
                nb = NotebookPage(page, server, notebook, artifacts=artifacts, prefix=f"{stem}-")
                nb.open()
                yield nb
            except BaseException:
                page.screenshot(path=str(artifacts / f"{stem}-FAILED.png"), full_page=True)
                (artifacts / f"{stem}-FAILED.html").write_text(page.content())
                raise
            finally:
                (artifacts / f"{stem}-console.log").write_text("\n".join(console))
                browser.close()
    finally:
        server.stop()
        shutil.copy(server.log_path, artifacts / f"{stem}-server.log")
