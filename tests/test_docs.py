"""The documentation stays true to the code: the settings page's tables are made from the
settings, the README stays a short front door that keeps CI's two commands, and the install
instructions give what the README's main job needs. (`mkdocs build --strict`, the docs tier
of `.ci/test`, checks every link, anchor and page of the site.)"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from harness_nb.notebook.config import HarnessNB, notebook_default
from harness_nb.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

MAIN_JOB = "bash .ci/setup && .venv/bin/python -m harness_nb.testing.run_notebook notebooks/quickstart.ipynb"
ALL_TESTS = "bash .ci/setup && bash .ci/test"


def _hook() -> ModuleType:
    """docs/hooks/settings_table.py, as MkDocs loads it (it is no package of ours)."""
    spec = importlib.util.spec_from_file_location("settings_table", DOCS / "hooks" / "settings_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(table: str) -> dict[str, list[str]]:
    """A generated table's rows by setting name: its cells, split at unescaped ``|``."""
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        rows[cells[0].strip("`")] = cells
    return rows


# --- the settings page ---------------------------------------------------------------------


def test_every_run_setting_has_a_row_with_its_default_and_help():
    rows = _rows(_hook().settings_table())
    assert list(rows) == list(SETTINGS), "the table lists the settings in RunSettings' order"
    for name, setting in SETTINGS.items():
        cells = rows[name]
        assert len(cells) == 3, f"{name}'s row has {len(cells)} cells: its help broke the table"
        assert cells[1].startswith(f"`{notebook_default(setting)!r}`"), (name, cells[1])
        assert cells[2].endswith("◆") == setting.built, name
        # the help as written, only escaped for Markdown
        assert cells[2].replace("\\", "").replace("&lt;", "<").replace("&gt;", ">").removesuffix(" ◆") == setting.help


def test_the_notebook_settings_are_the_traits_no_run_setting_makes():
    rows = _rows(_hook().notebook_settings_table())
    traits = HarnessNB.class_traits(config=True)
    assert set(rows) == set(traits) - set(SETTINGS)
    assert {"workdir", "approval_timeout", "unattended_approvals", "updates_per_second", "kernel_tools"} <= set(rows)
    assert rows["workdir"][1] == "`'.'` (`$HARNESS_NB_WORKDIR`)"


def test_the_settings_page_asks_for_both_tables_and_the_hook_fills_them():
    hook = _hook()
    page = (DOCS / "settings.md").read_text()
    assert hook.SETTINGS_MARK in page and hook.NOTEBOOK_SETTINGS_MARK in page
    built = hook.on_page_markdown(page)
    assert hook.SETTINGS_MARK not in built and hook.NOTEBOOK_SETTINGS_MARK not in built
    for name in [*SETTINGS, "workdir", "kernel_tools"]:
        assert f"| `{name}` |" in built, name
    assert "settings_table.py" in (ROOT / "mkdocs.yml").read_text(), "mkdocs.yml must list the hook"


def test_a_help_cannot_break_its_row_or_read_as_html():
    cell = _hook()._cell("a | b, sessions/<id>.jsonl, agent files (*.md)")
    assert cell == "a \\| b, sessions/&lt;id&gt;.jsonl, agent files (\\*.md)"


# --- the README ----------------------------------------------------------------------------


def test_the_readme_is_a_front_door_of_at_most_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the detail into a page under docs/"


def test_the_readme_keeps_the_two_commands_ci_and_the_main_job_run():
    text = README.read_text()
    assert f"```bash\n{MAIN_JOB}\n```" in text
    assert f"```bash\n{ALL_TESTS}\n```" in text
    assert ALL_TESTS in (ROOT / ".ci" / "run").read_text()


def test_every_page_the_readme_links_exists():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("docs/") for t in local)
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


# --- install instructions match the main job -----------------------------------------------


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower().replace("_", "-") for r in requirements}


def test_the_run_extra_holds_every_third_party_import_of_run_notebook():
    """`pip install "harness_nb[run]"` is enough for the README's main job: each module
    run_notebook imports is the standard library's, harness_nb's, or a distribution that the
    dependencies or the `run` extra name."""
    project = PYPROJECT["project"]
    named = _requirement_names(project["dependencies"]) | _requirement_names(project["optional-dependencies"]["run"])
    tree = ast.parse((ROOT / "harness_nb" / "testing" / "run_notebook.py").read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
    tops = {m.partition(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"__future__"}
    assert tops >= {"nbclient", "nbformat"}, "the check must see run_notebook's imports"
    distributions = importlib.metadata.packages_distributions()
    for top in sorted(tops):
        names = {d.lower().replace("_", "-") for d in distributions[top]}
        assert names & named, f"run_notebook imports {top} ({names}): add it to the run extra in pyproject.toml"


def test_the_install_instructions_name_the_run_extra():
    assert "harness_nb[run]" in PYPROJECT["project"]["optional-dependencies"]["test"]
    for page in (README, DOCS / "getting-started.md"):
        assert 'pip install -e ".[run]"' in page.read_text(), page.name


_WITHOUT_NBCLIENT = "import sys; sys.modules['nbclient'] = None; "


def test_run_notebook_without_its_extra_says_how_to_get_it(tmp_path):
    """Run as the main job runs it, with nbclient not installed (a module set to None in
    sys.modules cannot be imported): one line naming the extra, no traceback."""
    script = _WITHOUT_NBCLIENT + (
        "import runpy; sys.argv = ['run_notebook', 'x.ipynb']; "
        "runpy.run_module('harness_nb.testing.run_notebook', run_name='__main__', alter_sys=True)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip() == "run_notebook needs nbclient, which is not installed: pip install 'harness_nb[run]'"


def test_importing_run_notebook_without_its_extra_raises_that_message():
    script = _WITHOUT_NBCLIENT + (
        "\ntry:\n    import harness_nb.testing.run_notebook\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc.name, exc)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == (
        "ImportError nbclient run_notebook needs nbclient, which is not installed: pip install 'harness_nb[run]'"
    )


# --- license metadata ----------------------------------------------------------------------


def test_the_license_is_an_spdx_expression_with_its_file():
    """A TOML table is deprecated (setuptools warned three times per install)."""
    project = PYPROJECT["project"]
    assert project["license"] == "MIT"
    for pattern in project["license-files"]:
        assert list(ROOT.glob(pattern)), f"license-files names {pattern}, which matches no file"


def test_the_installed_metadata_carries_the_license_expression():
    metadata = importlib.metadata.metadata("harness_nb")
    assert metadata["License-Expression"] == "MIT", "reinstall (bash .ci/setup): the metadata predates the change"
