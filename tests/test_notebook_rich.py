"""Rich outputs of ``run_python`` in a real ipykernel: a matplotlib figure is drawn to PNG,
shown in the cell (an Output below the tool's line in the run view) and sent to the model
as an image of the tool result; a DataFrame is HTML in the cell and text to the model."""

from __future__ import annotations

import base64

import pytest

from harness_nb.sandbox.checkpoints.checkpoint import without_effects
from notebook_support import displayed, model_requests, notebook, result_text, tool_images, tool_results

pytestmark = pytest.mark.kernel

pytest.importorskip("matplotlib")
pytest.importorskip("pandas")

PLOT = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 4, 9])\nprint('plotted')"
TABLE = "import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'rain_mm': [763, 6]})"


SHOWN = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(4, 3))\nax.plot([1, 4, 9])\nplt.show()"


async def test_a_figure_shown_in_the_call_that_first_imports_pyplot_still_reaches_the_model(tmp_path):
    """``plt.show()`` in the very call that imports pyplot: the inline backend sets itself up
    only when that cell ends, so the figure was displayed as text alone and lost (the model
    trial's first chart). run_python draws it itself."""
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"id": "plot", "name": "run_python", "arguments": {"code": SHOWN}}]},
                {"text": "Shown."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        run = k.execute("%%agent\nplot the squares")
        k.click(await k.wait_for_button("Approve"))
        await k.finished(run)
        first, second = await model_requests(k, "main")
        (image,) = tool_images(second)
        assert image["media_type"] == "image/png" and image["bytes"] > 1000
        (shown,) = tool_results(second)
        assert without_effects(shown) == "<Figure size 400x300 with 1 Axes>\nstatus: ok"
        assert len(displayed(k, "image/png")) == 1, "the person sees the figure once"


async def test_a_plot_reaches_the_cell_and_the_model_and_a_dataframe_is_html_in_the_cell(tmp_path):
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"id": "plot", "name": "run_python", "arguments": {"code": PLOT}}]},
                {"tool_calls": [{"id": "table", "name": "run_python", "arguments": {"code": TABLE}}]},
                {"text": "Plotted and tabled."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        run = k.execute("%%agent\nplot the squares, then show the rain table")
        k.click(await k.wait_for_button("Approve"))
        await k.wait_for(lambda: len(displayed(k, "image/png")) == 1, 60, "the figure in the run view")
        k.click(await k.wait_for_button("Approve"))
        await k.finished(run)
        assert result_text(run) == "Plotted and tabled."

        # The cell: the figure as a PNG (drawn once: the inline backend does not show it
        # again when the cell ends), the DataFrame as an HTML table.
        (png,) = displayed(k, "image/png")
        assert base64.b64decode(png["data"]["image/png"]).startswith(b"\x89PNG")
        assert not [o for o in run.outputs if o["msg_type"] == "display_data" and "image/png" in o["data"]]
        (table,) = displayed(k, "text/html")
        assert "<table" in table["data"]["text/html"] and "Oslo" in table["data"]["text/html"]
        assert "open figures: 0" in k.text(await k.run("import matplotlib.pyplot as plt\nprint('open figures:', len(plt.get_fignums()))"))

        # The model: the image with the tool result that drew it, in the very next request;
        # the DataFrame as text.
        first, second, third = await model_requests(k, "main")
        assert tool_images(first) == []
        (image,) = tool_images(second)
        assert image["media_type"] == "image/png" and image["width"] and image["height"] and image["bytes"] > 1000
        # matplotlib makes its folders in $HOME, which lies in these tests' workdir: effects
        (plotted,) = tool_results(second)
        assert without_effects(plotted) == "plotted\n<Figure size 400x300 with 1 Axes>\nstatus: ok"
        table_text = tool_results(third)[1]
        assert "city" in table_text and "Oslo" in table_text and "<table" not in table_text
        assert without_effects(table_text).endswith("\nstatus: ok · displayed DataFrame 2×2")
        assert len(tool_images(third)) == 1, "the plot's image stays with its own result"
