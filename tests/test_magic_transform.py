"""The post-transformer over what IPython made of a cell: our magics are awaited, and a
``%@name`` with no such agent becomes ``%agents --unknown=name`` (its error lists the
agents), whether the call is a line magic or a cell magic spanning lines."""

from __future__ import annotations

from IPython.core.inputtransformer2 import TransformerManager

from harness_nb.notebook.kernel.transform import await_our_magics, name_unknown_agents


def transformed(cell: str, known: set[str]) -> str:
    lines = TransformerManager().transform_cell(cell).splitlines(keepends=True)
    return "".join(await_our_magics(name_unknown_agents(lines, known.__contains__)))


def test_an_unknown_agent_magic_becomes_the_listing_error_and_known_ones_stay():
    code = transformed("x = 1\n%@nosuch look at {x}?\n%@explore hi\n", {"explore"})
    assert "await get_ipython().run_line_magic('agents', '--unknown=nosuch')" in code
    assert "await get_ipython().run_line_magic('@explore', 'hi')" in code
    assert code.startswith("x = 1\n")


def test_an_unknown_agent_cell_magic_is_replaced_whole():
    code = transformed("%%@nosuch --flag\nline one\nline 'two'\n", set())
    assert code.strip() == "await get_ipython().run_line_magic('agents', '--unknown=nosuch')"


def test_cells_without_agent_magics_are_left_alone():
    cell = "import os\nprint(os.sep)\n"
    assert transformed(cell, set()) == cell
