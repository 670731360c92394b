"""Run a notebook headless with nbclient and print what it shows.

    python -m harness_nb.testing.run_notebook notebooks/quickstart.ipynb
    python -m harness_nb.testing.run_notebook notebooks/*.ipynb --save   # store the outputs

The kernel runs in the notebook's own folder (as nbval and JupyterLab do) on this Python
interpreter, so it sees the same installed harness_nb. Like nbval, nbclient cannot click:
it sends ``allow_stdin=false``, so approvals are decided at once by
``HarnessNB.unattended_approvals``. Each code cell's source is printed, then its text
outputs (``text/plain`` of widgets, the Markdown of answers, streams, errors).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..core.media import STATIC_VIEW_OPEN

# nbclient and nbformat are not needed to use harness_nb, only to run notebooks headless:
# they come with the `run` extra. Without them, one line saying how to get them (a plain
# message under `python -m`, an ImportError that says the same to code importing this).
RUN_EXTRA_MISSING = "run_notebook needs {name}, which is not installed: pip install 'harness_nb[run]'"
try:
    import nbclient  # noqa: F401  (first: without the extra this fails before nbformat's second of imports)
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
except ImportError as exc:
    _message = RUN_EXTRA_MISSING.format(name=(exc.name or "nbclient").partition(".")[0])
    if __name__ == "__main__":
        raise SystemExit(_message) from None
    raise ImportError(_message, name=exc.name) from exc

_SPEC = "harness-nb-current"


def _current_env_manager(folder: str) -> AsyncKernelManager:
    """A kernel manager for an ipykernel on ``sys.executable`` (a private kernelspec, so the
    machine's "python3" kernel, whatever Python it points at, does not matter)."""
    spec = Path(folder) / _SPEC
    spec.mkdir()
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "Python 3 (ipykernel)", "language": "python"})
    )
    # IPC sockets in the private folder: no TCP port is opened (and the kernel does not
    # print its warning about unencrypted TCP into the output)
    return AsyncKernelManager(
        kernel_name=_SPEC,
        kernel_spec_manager=KernelSpecManager(kernel_dirs=[folder]),
        transport="ipc",
        ip=str(Path(folder) / "kernel"),
    )


def execute(path: Path, *, timeout: float = 600, kernel: str | None = None) -> nbformat.NotebookNode:
    """Execute the notebook at ``path`` in its folder and return it with its outputs.
    ``kernel`` names an installed kernelspec; by default an ipykernel on this interpreter."""
    nb = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent.resolve())}}
    with tempfile.TemporaryDirectory(prefix="harness-nb-kernelspec-") as specs:
        km = None if kernel else _current_env_manager(specs)
        client = NotebookClient(
            nb, km=km, kernel_name=kernel or _SPEC, timeout=timeout, resources=resources, allow_errors=False
        )
        client.execute(cleanup_kc=True)  # shut our kernel down too (nbclient only does for its own)
    return nb


_TAG = re.compile(r"<[^>]+>")
_DETAILS_BODY = re.compile(r"</summary>.*?</details>", re.DOTALL)  # a tool call's full result
_STYLE_SHEET = re.compile(r"<style.*?</style>", re.DOTALL)  # a view's CSS: never text a reader sees
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def widget_text(model_id: str, state: dict[str, Any], depth: int = 0) -> list[str]:
    """The text a widget tree showed when the run ended (HTML values without their tags and
    style sheets, the Markdown of Output widgets), one line per piece: a run view's header, its tool calls,
    subagent lines and approval cards."""
    model = state.get(model_id)
    if model is None or depth > 20:
        return []
    st = model.get("state", {})
    lines: list[str] = []
    value = st.get("value")
    if model.get("model_name") in ("HTMLModel", "LabelModel") and isinstance(value, str):
        text = html.unescape(_TAG.sub(" ", _DETAILS_BODY.sub("", _STYLE_SHEET.sub("", value))))
        lines += [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    for out in st.get("outputs", ()) or ():
        data = out.get("data", {})
        lines += str(data.get("text/markdown") or data.get("text/plain") or out.get("text", "")).splitlines()
    for child in st.get("children", ()) or ():
        lines += widget_text(str(child).removeprefix("IPY_MODEL_"), state, depth + 1)
    return lines


_RESULT_BODY = re.compile(r"</summary><pre.*?</pre></details>", re.DOTALL)  # a tool call's full result
_BREAK = re.compile(r"<(?:div|summary|br)\b")


def static_text(value: str) -> list[str]:
    """The lines of a run view's static copy (``view_static``): header, activity, what the
    tools displayed and background results, without style sheet or full tool results."""
    text = _BREAK.sub(lambda m: "\n" + m.group(0), _RESULT_BODY.sub("", _STYLE_SHEET.sub("", value)))
    text = html.unescape(_TAG.sub(" ", text))
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def text_outputs(cell: Any, widgets: dict[str, Any] | None = None) -> Iterator[str]:
    """The text a reader sees for each output of a code cell (with ``widgets``, the saved
    widget state, a widget's final contents instead of its one-line text form)."""
    for out in cell.get("outputs", ()):
        kind = out["output_type"]
        if kind == "stream":
            yield out["text"]
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {})
            view = data.get(_WIDGET_VIEW)
            if widgets and view and view.get("model_id") in widgets:
                yield "\n".join(widget_text(view["model_id"], widgets))
            elif STATIC_VIEW_OPEN in str(data.get("text/html", "")):
                yield "\n".join(static_text(str(data["text/html"])))
            else:
                yield str(data.get("text/markdown") or data.get("text/plain") or "")
        elif kind == "error":
            yield f"{out['ename']}: {out['evalue']}"


def render(nb: nbformat.NotebookNode) -> str:
    """Code cells as ``In [n]:`` + source and their text outputs; Markdown headings kept as
    section titles so the printout follows the tutorial."""
    parts: list[str] = []
    saved = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    widgets = saved.get("state") or None
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            headings = [ln for ln in cell.source.splitlines() if ln.startswith("#")]
            parts.extend(f"\n{h}" for h in headings)
            continue
        if cell.cell_type != "code":
            continue
        parts.append(f"\nIn [{cell.get('execution_count') or ' '}]:\n{textwrap.indent(cell.source, '    ')}")
        for text in text_outputs(cell, widgets):
            text = text.rstrip("\n")
            if text:
                parts.append(textwrap.indent(text, "  | ", lambda _line: True))
    return "\n".join(parts) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness_nb.testing.run_notebook",
        description="Execute notebooks headless (nbclient, in each notebook's folder) and print their cells.",
    )
    parser.add_argument("notebooks", nargs="+", type=Path, help="the .ipynb files to run")
    parser.add_argument("--save", action="store_true", help="write the outputs back into each notebook")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a cell may take (default 600)")
    parser.add_argument("--kernel", default=None, help="an installed kernelspec (default: this Python)")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.notebooks:
        if not path.is_file():
            parser.error(f"{path}: no such notebook")
        print(f"=== {path}")
        try:
            nb = execute(path, timeout=args.timeout, kernel=args.kernel)
        except CellExecutionError as exc:
            print(f"FAILED: {path}\n{exc}", file=sys.stderr)
            failed += 1
            continue
        sys.stdout.write(render(nb))
        if args.save:
            nbformat.write(nb, path)
            print(f"=== saved {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
