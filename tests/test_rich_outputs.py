"""What run_python captures and how a run view shows it, without a kernel: new matplotlib
figures drawn to PNG and closed, bounded; a tool's displays (or, without any, its images)
in an Output below its line, text scrubbed. In a real kernel: ``test_notebook_rich.py``."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from harness_nb.core import DisplayData, ImagePart, ToolCall, ToolCallFinished, ToolCallStarted
from harness_nb.notebook.widgets.view import RunView, tool_outputs
from image_support import png
from widget_support import ManualClock, WidgetWire

PLOT = ImagePart.from_bytes(png(64, 48))


# -- the run view ----------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def widget_wire() -> Any:
    recorder = WidgetWire()
    recorder.install()
    yield recorder
    recorder.uninstall()


def test_the_view_shows_what_a_tool_displayed_below_its_line(widget_wire: WidgetWire) -> None:
    view = RunView("main", "m", scheduler=ManualClock())
    first, second = ToolCall(id="a", name="run_python"), ToolCall(id="b", name="remote_screenshot")
    view(ToolCallStarted(call=first))
    view(ToolCallStarted(call=second))
    table = DisplayData(data={"text/html": "<table>sk-ant-api03-" + "k" * 40 + "</table>", "text/plain": "t"})
    view(ToolCallFinished(call=first, result="t", displays=(table,), images=()))
    view(ToolCallFinished(call=second, result="shot", images=(PLOT,)))
    line_a, shown_a, line_b, shown_b = view.activity.children
    assert shown_a.outputs[0]["data"]["text/html"].startswith("<table>") and "sk-ant" not in shown_a.outputs[0]["data"]["text/html"]
    # a tool that made no displays (an MCP tool's image result): its images are shown
    assert shown_b.outputs == (
        {"output_type": "display_data", "data": {"image/png": PLOT.data, "text/plain": f"[{PLOT.describe()}]"}, "metadata": {}},
    )
    assert tool_outputs(ToolCallFinished(call=first, result="no images")) == ()


# -- run_python outside a kernel -----------------------------------------------------------


def test_run_code_draws_new_figures_and_closes_them() -> None:
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness_nb.notebook.kernel.tools import run_code

    namespace: dict[str, Any] = {}
    output = run_code(namespace, "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('drawn')\n41 + 1")
    assert output.text == "drawn\n42\n<Figure size 640x480 with 1 Axes>\nstatus: ok"
    (image,) = output.images
    assert image.media_type == "image/png" and image.width and base64.b64decode(image.data).startswith(b"\x89PNG")
    assert [set(d.data) for d in output.displays] == [{"image/png", "text/plain"}]
    assert plt.get_fignums() == []
    many = run_code(namespace, "for _ in range(6): plt.figure()")
    assert len(many.images) == 4 and "[2 more figures closed, not drawn: at most 4 per call]" in many.text
    assert plt.get_fignums() == []
    with pytest.raises(Exception, match="ZeroDivisionError"):
        run_code(namespace, "plt.figure()\n1 / 0")
    assert plt.get_fignums() == [], "a failing call's figures are closed too"
