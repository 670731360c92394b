"""Shared pieces of the real-kernel notebook tests.

A test drives an ipykernel through ``KernelDriver`` (a frontend stand-in: it runs cells,
tracks widget models, clicks buttons with the comm message JupyterLab sends, interrupts),
loads ``harness_nb`` and points ``HarnessNB.model`` at a small scripted model written into
the test's folder, which is also the kernel's working directory and ``$HOME`` (so a
developer's own ``~/.claude/agents`` never leak in). What the model was sent is read back
from the scripted provider inside the kernel.

Starting a kernel is most of such a test's time, so the tests of a module share one
(``shared_kernel``, a module-scoped fixture) and each takes a fresh harness in it
(``fresh_harness``); a test that interrupts, restarts or kills the kernel, or needs one
never used before, starts its own (``notebook``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness_nb.testing.kernel_driver import Cell, KernelDriver, visible_text

# the extension's state, reached through its registered Magics (notebook.harness_magics)
CONTROLLER = "__import__('harness_nb.notebook').notebook.harness_magics(get_ipython()).controller"
HARNESS = f"{CONTROLLER}.harness()"
_JSON_MARK = "@@json@@"

# Settings a developer may have exported; a test starts from the documented defaults.
_CLEARED_ENV = (
    "HARNESS_NB_MODEL",
    "HARNESS_NB_WORKDIR",
    "HARNESS_NB_APPROVAL_POLICY",
    "HARNESS_NB_APPROVAL_TIMEOUT",
    "HARNESS_NB_UNATTENDED_APPROVALS",
    "HARNESS_NB_BACKGROUND_APPROVALS",
    "HARNESS_NB_RECORD_TO",
    "HARNESS_NB_SANDBOX",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
)


def write_script(folder: Path, script: dict[str, Any] | list[Any], name: str = "script.yaml") -> str:
    """Write a scripted-model file into ``folder``; return its name (relative to the kernel's cwd)."""
    (folder / name).write_text(yaml.safe_dump(script, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return name


@asynccontextmanager
async def notebook(
    folder: Path,
    script: dict[str, Any] | list[Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> AsyncIterator[KernelDriver]:
    """A kernel in ``folder`` (or, given, in ``cwd``) with harness_nb loaded and, given a
    ``script``, the scripted model configured through ``%config``."""
    home = folder / "home"
    home.mkdir(exist_ok=True)
    kernel_env = {name: "" for name in _CLEARED_ENV}
    kernel_env.update({"HOME": str(home), "IPYTHONDIR": str(home / ".ipython")})
    kernel_env.update(env or {})
    async with KernelDriver(cwd=cwd or folder, env=kernel_env) as k:
        await k.run("%load_ext harness_nb")
        if script is not None:
            written = write_script(folder, script)
            await k.run(f"%config HarnessNB.model = 'scripted/{written if cwd is None else folder / written}'")
        yield k


_ENV_SNAPSHOT = ".kernel-env.json"


@asynccontextmanager
async def shared_kernel(folder: Path) -> AsyncIterator[KernelDriver]:
    """A kernel for the tests of one module: ``notebook(folder)``, with the environment it
    started with kept in ``folder`` (its ``cwd``) for ``fresh_harness`` to restore."""
    async with notebook(folder) as k:
        snapshot = folder / _ENV_SNAPSHOT
        await k.run(f"import json, os\nwith open({str(snapshot)!r}, 'w') as f:\n    json.dump(dict(os.environ), f)")
        k.forget()
        yield k


async def fresh_harness(
    k: KernelDriver,
    folder: Path,
    script: dict[str, Any] | list[Any] | None = None,
    *,
    env: dict[str, str] | None = None,
) -> KernelDriver:
    """What ``notebook(folder, script, env=env)`` gives a test, in a ``shared_kernel``: a new
    harness (harness_nb unloaded and loaded again: no conversation, task, approval, rule or
    view of the tests before), the kernel's working directory and ``$HOME`` in ``folder``,
    its environment as it started plus ``env``, the process's secrets forgotten, no user
    variables, no ``HarnessNB`` section in IPython's config, and the frontend's record of messages and widgets emptied. (The settings'
    defaults from ``$HARNESS_NB_*`` are read when harness_nb is first imported: a test of
    those starts its own kernel with ``notebook(folder, env=...)``.)"""
    home = folder / "home"
    home.mkdir(exist_ok=True)
    snapshot = Path(k.cwd) / _ENV_SNAPSHOT  # k.cwd: where the kernel started
    await k.run("%unload_ext harness_nb")
    await k.run(
        "%reset -f\n"
        "import json as _json, os as _os\n"
        "from harness_nb.core.secret import SECRETS as _SECRETS\n"
        f"with open({str(snapshot)!r}) as _f:\n"
        "    _env = _json.load(_f)\n"
        f"_env.update({{'HOME': {str(home)!r}, **{env or {}!r}}})\n"
        "_os.environ.clear()\n"
        "_os.environ.update(_env)\n"
        f"_os.chdir({str(folder)!r})\n"
        "_SECRETS.clear()\n"
        "get_ipython().config.pop('HarnessNB', None)\n"
        "del _json, _os, _SECRETS, _f, _env"
    )
    await k.run("%load_ext harness_nb")
    if script is not None:
        await k.run(f"%config HarnessNB.model = 'scripted/{write_script(folder, script)}'")
    k.forget()
    return k


async def kernel_json(k: KernelDriver, expr: str, *, setup: str = "") -> Any:
    """Evaluate ``expr`` in the kernel and return it through JSON."""
    code = f"{setup}\nimport json as _json\nprint({_JSON_MARK!r} + _json.dumps({expr}))"
    cell = await k.run(code)
    for line in k.text(cell).splitlines():
        if line.startswith(_JSON_MARK):
            return json.loads(line[len(_JSON_MARK) :])
    raise AssertionError(f"no JSON printed by {expr!r}: {k.text(cell)!r}")


async def model_requests(k: KernelDriver, agent: str | None = None) -> list[dict[str, Any]]:
    """Every request the scripted model received, oldest first, as
    ``{"agent": …, "messages": [{"role": …, "content": …, "images": […]}, …]}``; a tool
    result's images as ``{"media_type", "width", "height", "bytes"}`` (the data left in
    the kernel)."""
    requests: list[dict[str, Any]] = await kernel_json(
        k,
        "[{'agent': r.agent, 'messages': [{'role': m.role, 'content': getattr(m, 'content', ''), "
        "'images': [{'media_type': i.media_type, 'width': i.width, 'height': i.height, 'bytes': i.nbytes} "
        "for i in getattr(m, 'images', ())]} "
        f"for m in r.messages]}} for r in {HARNESS}.provider.requests]",
    )
    return [r for r in requests if agent is None or r["agent"] == agent]


def last_user_text(request: dict[str, Any]) -> str:
    """The latest user message of a recorded request (the prompt or an injected message)."""
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")


def tool_images(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The images of the tool results a recorded request showed the model."""
    return [image for m in request["messages"] if m["role"] == "tool" for image in m["images"]]


def displayed(k: KernelDriver, kind: str) -> list[dict[str, Any]]:
    """Every output of kind ``kind`` (``image/png``, ``text/html``) the frontend holds in
    a widget Output (a run view shows a tool's displays in one)."""
    return [
        out
        for state in k.models.values()
        for out in state.get("outputs", ()) or ()
        if kind in out.get("data", {})
    ]


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a recorded request showed the model."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


async def task_state(k: KernelDriver, task_id: str) -> str:
    """The tracker's state of a task (running, completed, failed, cancelled)."""
    state: str = await kernel_json(k, f"str({HARNESS}.tracker.get({task_id!r}).status)")
    return state


def widget_text(k: KernelDriver, needle: str) -> str | None:
    """The first widget text (HTML value or Output content) containing ``needle``."""
    return next((t for t in k.widget_texts() if needle in t), None)


def read_text(k: KernelDriver, needle: str) -> str | None:
    """The first widget text containing ``needle`` as a person reads it (tags dropped)."""
    return next((t for t in map(visible_text, k.widget_texts()) if needle in t), None)


async def wait_for_widget_text(k: KernelDriver, needle: str, timeout: float = 30) -> str:
    """Wait until some widget shows ``needle``; return that widget's text."""
    found: str = await k.wait_for(lambda: widget_text(k, needle), timeout, f"a widget showing {needle!r}")
    return found


def result_text(cell: Cell) -> str:
    """The cell's value (its execute_result) as text/plain; '' when it has none."""
    for out in cell.outputs:
        if out["msg_type"] == "execute_result":
            text: str = out["data"].get("text/plain", "")
            return text
    return ""


def help_pages(cell: Cell) -> list[str]:
    """The help texts (``x?``) a cell sent as pager payloads in its reply."""
    assert cell.reply is not None
    return [p["data"]["text/plain"] for p in cell.reply["content"].get("payload", ()) if p.get("source") == "page"]


def error_name(cell: Cell) -> str | None:
    """The exception name of a failed cell (from its reply)."""
    if cell.reply is None or cell.reply["content"]["status"] != "error":
        return None
    name: str = cell.reply["content"].get("ename", "")
    return name


def widgets_opened_by(k: KernelDriver, cell: Cell) -> set[str]:
    """Comm ids of the widgets created while ``cell`` was the parent (its run view and cards)."""
    return {
        m["content"]["comm_id"]
        for m in k.messages_for(cell)
        if m["header"]["msg_type"] == "comm_open" and m["content"].get("target_name") == "jupyter.widget"
    }


def children(k: KernelDriver, model_id: str) -> list[str]:
    """The comm ids of a container widget's children."""
    return [str(ref).removeprefix("IPY_MODEL_") for ref in k.models.get(model_id, {}).get("children", ())]


def tree(k: KernelDriver, model_id: str) -> set[str]:
    """``model_id`` and every widget below it."""
    found, todo = set(), [model_id]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children(k, current))
    return found


def comm_ids_showing(k: KernelDriver, needle: str) -> list[str]:
    """Comm ids of the widgets whose text (value or outputs) contains ``needle``."""
    found = []
    for cid, state in k.models.items():
        texts = [state["value"]] if isinstance(state.get("value"), str) else []
        for out in state.get("outputs", ()) or ():
            data = out.get("data", {})
            texts.append(data.get("text/markdown") or data.get("text/plain") or out.get("text", ""))
        if any(needle in t for t in texts):
            found.append(cid)
    return found


@dataclass
class RunViewState:
    """What the frontend shows of one run view: its header (as read, without tags), the
    first text of each of its approval cards (the card's summary while it waits, its one
    decided line after), and the background results posted into it."""

    header: str
    cards: list[str]
    completions: list[str]


def _classes(state: dict[str, Any]) -> list[str]:
    return list(state.get("_dom_classes", ()) or ())


def run_views(k: KernelDriver) -> list[RunViewState]:
    """Every run view the kernel has displayed (a VBox marked ``hnb-run``), as the
    frontend's widget models describe it."""

    def model(ref: str) -> dict[str, Any]:
        return k.models.get(str(ref).removeprefix("IPY_MODEL_"), {})

    def part(parts: list[dict[str, Any]], name: str) -> dict[str, Any]:
        return next((p for p in parts if name in _classes(p)), {})

    views = []
    for state in k.models.values():
        if "hnb-run" not in _classes(state):
            continue
        parts = [model(ref) for ref in state.get("children", ())]
        activity = part(parts, "hnb-activity")
        cards = [
            model(model(ref)["children"][0]).get("value", "")
            for ref in activity.get("children", ())
            if "hnb-card" in _classes(model(ref))
        ]
        posted = [out["data"].get("text/plain", "") for out in part(parts, "hnb-completions").get("outputs", ())]
        views.append(RunViewState(visible_text(part(parts, "hnb-header").get("value", "")), cards, posted))
    return views
