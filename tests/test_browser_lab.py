"""The quickstart notebook in a real JupyterLab, driven by Playwright in headless Chromium.

What a person sees: a cell that needs approval shows an Approve button (and a box for a
denial's reason) while it is busy;
clicking it in the page lets the run finish (and the command really runs); a delegated
subagent's progress line and the final Markdown answer render; a background task's result
appears in its own cell while a later cell is still busy.

The test starts its own JupyterLab (this interpreter, 127.0.0.1, a token, temporary config,
data and runtime folders) on a copy of notebooks/quickstart.ipynb with its outputs cleared,
and uses Debian's chromium (never a browser downloaded by Playwright). Screenshots of the key
moments go to test-artifacts/browser/. Readiness follows the pitfalls in the browser notes:
wait for the status bar's "Python 3 (ipykernel) | Idle", and tell that a cell finished by
its prompt going from ``[*]:`` to ``[n]:`` (kernel idle flips on comm traffic alone).
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
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _copy_quickstart(root: Path) -> Path:
    """The quickstart notebook without its saved outputs (so every output the test sees was
    produced now), with the script and project it uses."""
    nb = json.loads((NOTEBOOKS / "quickstart.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb["metadata"].pop("widgets", None)
    target = root / "quickstart.ipynb"
    target.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    shutil.copytree(NOTEBOOKS / "scripts", root / "scripts")
    shutil.copytree(NOTEBOOKS / "project", root / "project")
    return target


def _settings(config_dir: Path, plugin: str, values: dict[str, Any]) -> None:
    path = config_dir / "lab" / "user-settings" / plugin
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(values))


class Lab:
    """A JupyterLab server in its own process group, with private Jupyter folders."""

    def __init__(self, tmp: Path, root: Path) -> None:
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        config, data = tmp / "jupyter-config", tmp / "jupyter-data"
        config.mkdir()
        # No news or update checks (no network here), and no toast asking about them.
        (config / "jupyter_lab_config.py").write_text(
            "c.LabApp.news_url = None\n"
            "c.LabApp.check_for_updates_class = 'jupyterlab.handlers.announcements.NeverCheckForUpdate'\n"
        )
        _settings(
            config,
            "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )
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
        cmd = [
            sys.executable, "-m", "jupyterlab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={root}",
        ]  # fmt: skip
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")  # Lab refuses to run as root otherwise (CI runs as root)
        self.log_path = tmp / "lab.log"
        self._log = self.log_path.open("w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"jupyter lab did not answer in {timeout:g} s:\n{self.log_path.read_text()[-3000:]}")

    def stop(self) -> None:
        try:  # shuts the kernels down, then the server
            request = urllib.request.Request(f"{self.base}/api/shutdown?token={self.token}", method="POST", data=b"")
            urllib.request.urlopen(request, timeout=5).close()
            self.proc.wait(timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGTERM)  # the group this test started
                self.proc.wait(timeout=20)
        finally:
            self._log.close()


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[Lab, Path]]:
    root = tmp_path / "root"
    root.mkdir()
    notebook = _copy_quickstart(root)
    server = Lab(tmp_path, root)
    try:
        server.wait_ready()
        yield server, notebook
    finally:
        server.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(server.log_path, ARTIFACTS / "lab.log")


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (apt-get install chromium)")
def test_quickstart_in_jupyterlab(lab: tuple[Lab, Path]) -> None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed: pip install -e '.[browser]' (never `playwright install`)")

    server, notebook = lab
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in [*ARTIFACTS.glob("*.png"), *ARTIFACTS.glob("FAILED.*")]:
        old.unlink()
    with sync_playwright() as p:
        browser = p.chromium.launch(headless=True, executable_path=CHROMIUM, args=CHROME_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        console: list[str] = []
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"PAGEERROR: {e}"))
        try:
            _drive(page, server, notebook)
        except BaseException:
            page.screenshot(path=str(ARTIFACTS / "FAILED.png"), full_page=True)
            (ARTIFACTS / "FAILED.html").write_text(page.content())
            raise
        finally:
            (ARTIFACTS / "console.log").write_text("\n".join(console))
            browser.close()


def _drive(page: Any, server: Lab, notebook: Path) -> None:
    from playwright.sync_api import expect

    sources = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    ]
    kinds = [c["cell_type"] for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]

    def index_of(fragment: str) -> int:
        found = [i for i, s in enumerate(sources) if fragment in s and kinds[i] == "code"]
        assert len(found) == 1, f"expected one code cell containing {fragment!r}, found {found}"
        return found[0]

    def cell(i: int) -> Any:
        return page.locator(".jp-NotebookPanel:visible .jp-Notebook .jp-Cell").nth(i)

    def prompt(i: int) -> Any:
        return cell(i).locator(".jp-InputPrompt")

    def value(i: int) -> Any:
        """The cell's value (``Out[n]``): the agent's answer, rendered as Markdown."""
        return cell(i).locator(".jp-OutputArea-executeResult .jp-RenderedMarkdown")

    def start(i: int) -> None:
        """Select cell i (command mode) and press Shift+Enter; fail fast if Lab drops it."""
        cell(i).scroll_into_view_if_needed()
        prompt(i).click()
        expect(cell(i)).to_have_class(re.compile(r"\bjp-mod-selected\b"))
        page.keyboard.press("Shift+Enter")
        expect(prompt(i)).not_to_have_text("[ ]:", timeout=10_000)

    def finish(i: int, timeout: float = 60_000) -> None:
        expect(prompt(i)).to_have_text(DONE_PROMPT, timeout=timeout)
        errors = cell(i).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
        assert errors.count() == 0, f"cell {i} wrote to stderr: {errors.first.inner_text()}"

    def shot(name: str, i: int | None = None) -> None:
        if i is not None:
            cell(i).scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"))

    page.goto(f"{server.base}/lab/tree/{notebook.name}?reset&token={server.token}")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=60_000)
    # Not the toolbar's indicator: it says idle before any kernel exists, and a Shift+Enter
    # then is dropped. The status bar names the kernel only once it is connected.
    status = page.locator("#jp-main-statusbar .jp-StatusBar-TextItem[title^='Change kernel']")
    expect(status).to_have_text(f"{KERNEL_NAME} | Idle", timeout=60_000)

    first_run = index_of("Would the project's revenue report handle this data correctly?")
    delegate = index_of("Delegate the reading to the explore subagent")
    approval = index_of("Delete the scratch folder")
    exists = index_of('Path("scratch").exists()')
    background = index_of("%%agent --bg --agent explore")
    meanwhile = index_of("which columns does `orders` have?")
    wait = index_of("%task wait bg-1")

    for i, kind in enumerate(kinds):
        if kind != "code":
            continue
        start(i)
        if i == approval:
            # The card shows while the run waits; the cell is still busy.
            approve = cell(i).locator(".jp-OutputArea button.jupyter-button", has_text=re.compile(r"^Approve$"))
            approve.wait_for(state="visible", timeout=30_000)
            expect(prompt(i)).to_have_text("[*]:")
            expect(cell(i)).to_contain_text("rm -rf scratch")
            # the box for a denial's reason renders beside Deny (the kernel tests type into it)
            reason = cell(i).locator(".jp-OutputArea input[placeholder='Reason (optional) — tells the agent why']")
            expect(reason).to_be_visible()
            shot("1-approval-card", i)
            approve.click()
            finish(i)
            expect(value(i)).to_contain_text("If you approved it")
            decided = cell(i).locator(".widget-html-content i").filter(has_text=re.compile(r"^approved$"))
            expect(decided).to_have_count(1)  # the card records the decision
            expect(approve).to_be_disabled()
            expect(reason).to_be_disabled()
            shot("2-approved", i)
        elif i == meanwhile:
            # While this foreground run is busy, the background task's result lands in ITS cell.
            expect(prompt(i)).to_have_text("[*]:")
            seen = page.wait_for_function(
                """([bg, fg]) => {
                    const cells = [...document.querySelectorAll(
                        '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')];
                    const out = cells[bg].querySelector('.widget-output .jp-RenderedMarkdown');
                    if (!out || !out.innerText.includes('north 3, south 3, east 2')) return false;
                    return {bg: out.innerText, fgPrompt: cells[fg].querySelector('.jp-InputPrompt').innerText};
                }""",
                arg=[background, meanwhile],
                timeout=30_000,
                polling=50,
            ).json_value()
            assert seen["fgPrompt"].strip() == "[*]:", f"the background result only appeared after the later cell ended: {seen}"
            assert "bg-1" in seen["bg"] and "completed" in seen["bg"], seen
            shot("4-background-result-while-busy", background)
            finish(i)
        else:
            finish(i)

        if i == first_run:
            answer = value(i)
            expect(answer).to_contain_text("order 1004 has no unit count")
            expect(answer.locator("table")).to_have_count(1)  # the Markdown table rendered
            expect(cell(i)).to_contain_text("inspect_variable(name='orders')")
        elif i == delegate:
            # One progress line for the subagent, finished, with its title and tool count.
            line = cell(i).locator(".widget-html", has_text="explore — check orders.csv")
            expect(line).to_have_count(1)
            expect(line).to_contain_text("finished · 1 tool")
            expect(value(i)).to_contain_text("8 orders")
            shot("3-subagent-progress-and-answer", i)
        elif i == exists:
            # Approved in the page, so the command really ran.
            expect(cell(i).locator(".jp-OutputArea-output")).to_have_text("False")
        elif i == wait:
            expect(value(i)).to_contain_text("north 3, south 3, east 2")
    shot("5-finished")
