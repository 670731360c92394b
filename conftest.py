"""The test suite's tiers (see CONTRIBUTING.md).

Plain ``pytest`` (no path, no ``-m``) runs the core tier only, in parallel; the slow tiers
run by marker (``pytest -m kernel``, ``-m notebooks``, ``-m browser``, ``-m packaging``,
``-m ray``); a path or node id runs what it names, whatever its tier; ``bash .ci/test`` runs every tier. A test's tier is
its module's ``pytestmark`` or its own mark; nbval's cells are ``notebooks`` by their file,
and a test taking the ``kernel`` fixture (a module's shared kernel) is ``kernel``.
A test that starts a kernel, a Jupyter server or a Ray cluster without its tier's mark fails, so none
lands in the core tier by accident (``_launched_without_mark``).

It lives at the top of the repository so that it holds for ``tests/`` and ``notebooks/``
alike, whichever is named.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

SLOW_TIERS = ("kernel", "notebooks", "browser", "packaging", "ray")
# A module whose top-level ``pytestmark`` names a slow tier holds only tests of slow tiers.
_SLOW_MODULE = re.compile(rb"^pytestmark\s*=.*\bpytest\.mark\.(?:%b)\b" % "|".join(SLOW_TIERS).encode(), re.MULTILINE)

# The modules (``python -m MODULE``) whose launch a test's tier must allow: a Jupyter server
# starts kernels of its own, nbval starts one per notebook.
_LAUNCHES = {
    "ipykernel_launcher": ("an ipykernel", ("kernel", "notebooks")),
    "ipykernel": ("an ipykernel", ("kernel", "notebooks")),
    "harness_nb.testing.run_notebook": ("an ipykernel (run_notebook)", ("kernel", "notebooks")),
    "jupyterlab": ("a JupyterLab server", ("browser",)),
    "notebook": ("a Notebook 7 server", ("browser",)),
    "pip": ("a pip build or install", ("packaging",)),
    "phoenix.server.main": ("an Arize Phoenix server", ("browser",)),
}
# The programs whose launch a test's tier must allow: a Ray cluster's first process.
_PROGRAMS = {"gcs_server": ("a Ray cluster", ("ray",))}
_launched: list[tuple[str, tuple[str, ...]]] = []


def _record_launch(event: str, args: tuple[Any, ...]) -> None:
    """Audit hook: note every kernel, Jupyter server or Ray cluster this process starts (jupyter_client,
    nbclient and ``subprocess`` all go through ``subprocess.Popen``)."""
    if event != "subprocess.Popen":
        return
    argv = args[1]
    words = [os.fsdecode(w) for w in (argv.split() if isinstance(argv, (str, bytes)) else argv or ())]
    if words and os.path.basename(words[0]) in _PROGRAMS:
        _launched.append(_PROGRAMS[os.path.basename(words[0])])
        return
    for flag, module in zip(words, words[1:]):
        if flag == "-m" and module in _LAUNCHES:
            _launched.append(_LAUNCHES[module])
            return


sys.addaudithook(_record_launch)


def _tier(item: pytest.Item) -> str | None:
    return next((name for name in SLOW_TIERS if item.get_closest_marker(name) is not None), None)


def _core_tier_only(config: pytest.Config) -> bool:
    """Whether this run is the core tier: no path and no ``-m`` given."""
    return config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.markexpr


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the core tier, leave uncollected what it would deselect whole: the tutorial
    notebooks and the test modules whose ``pytestmark`` names a slow tier. Every worker
    imports every module it collects, and these cost each one about 3 s. (Any other module
    of a slow tier is collected and deselected below.)"""
    if not _core_tier_only(config):
        return None
    if collection_path.suffix == ".ipynb":
        return True
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return True if _SLOW_MODULE.search(collection_path.read_bytes()) else None
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark nbval's cells ``notebooks`` and the tests that take a shared ``kernel`` fixture
    ``kernel``; keep each notebook's cells in order whatever pytest-randomly did (it runs
    first); run only the core tier when no path and no ``-m`` were given."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebooks)
        elif "kernel" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kernel)
    _cells_in_order(items)
    if _core_tier_only(config):
        slow = [item for item in items if _tier(item) is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if _tier(item) is None]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """Count launches from the start of the test's setup (a module's kernel starts there)."""
    _launched.clear()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Fail the test that started a kernel, a Jupyter server or a Ray cluster without the mark of its tier."""
    result = yield
    _launched_without_mark(item)
    return result


def _launched_without_mark(item: pytest.Item) -> None:
    launched, tier = list(_launched), _tier(item)
    _launched.clear()
    for what, marks in launched:
        if tier not in marks:
            pytest.fail(
                f"{item.nodeid} started {what} but is not marked {' or '.join(marks)}: add "
                f"`pytestmark = pytest.mark.{marks[0]}` to its module (or @pytest.mark.{marks[0]} to the test) "
                "so it runs in its tier, not in the core tier",
                pytrace=False,
            )


def _cells_in_order(items: list[pytest.Item]) -> None:
    """Put nbval's cells back in notebook and cell order, in the places they hold: a
    notebook is one story, told in its kernel from the first cell to the last."""
    places = [n for n, item in enumerate(items) if item.path.suffix == ".ipynb"]
    cells = sorted((items[n] for n in places), key=lambda item: (str(item.path), getattr(item, "cell_num", 0)))
    for n, cell in zip(places, cells):
        items[n] = cell


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) nothing asks for it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with every notebook in one unit of work: the tutorial notebooks
    run in one folder (``notebooks/``, their workdir) and make and remove files there, so
    two at once would see each other's."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileNotebooksTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "notebooks" if ".ipynb::" in nodeid else super()._split_scope(nodeid)

    return LoadFileNotebooksTogether(config, log)
