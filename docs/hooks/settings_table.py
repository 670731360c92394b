"""The settings page's tables, made from the settings themselves when the site is built.

``RunSettings`` (``harness_nb/settings.py``) is the one list of a harness's settings, each
with its default and help; the notebook's own settings are the ``HarnessNB`` traits that no
run setting makes (``harness_nb/notebook/config.py``). A page that says ``{{ settings_table }}``
or ``{{ notebook_settings_table }}`` gets that table in its place (an MkDocs hook: listed
under ``hooks:`` in ``mkdocs.yml``), so a setting added, renamed or given a new default
shows on the page at the next build, with nothing to copy by hand. ``tests/test_docs.py``
checks the tables against the settings.

This module imports no MkDocs: the test imports it with the package's test extras only.
"""

from __future__ import annotations

import html
import os
from typing import Any

# A default that comes from the environment is shown with its variable, never with the value
# this machine happens to have: the variables are cleared before the settings are imported.
for _name in [n for n in os.environ if n.startswith("HARNESS_NB_")]:
    del os.environ[_name]

from harness_nb.notebook.config import ENVIRONMENT, HarnessNB, notebook_default  # noqa: E402
from harness_nb.settings import SETTINGS  # noqa: E402

SETTINGS_MARK = "{{ settings_table }}"
NOTEBOOK_SETTINGS_MARK = "{{ notebook_settings_table }}"
BUILT_MARK = "◆"


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: no HTML read into it (``<id>``), no column
    break (``|``), no emphasis from a glob's ``*``."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("*", "\\*")


def _default(name: str, value: Any) -> str:
    shown = f"`{value!r}`"
    variable = ENVIRONMENT.get(name)
    return f"{shown} (`${variable}`)" if variable else shown


def _table(rows: list[tuple[str, str, str]]) -> str:
    lines = ["| setting | default | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in rows]
    return "\n".join(lines)


def settings_table() -> str:
    """Every run setting, in ``RunSettings``' order: its ``%config`` name, its default as
    ``%config HarnessNB`` shows it (``0`` for none, lists and dicts), and its help; ◆ marks
    the settings a harness is built from."""
    rows = []
    for name, setting in SETTINGS.items():
        meaning = _cell(setting.help) + (f" {BUILT_MARK}" if setting.built else "")
        rows.append((name, _default(name, notebook_default(setting)), meaning))
    return _table(rows)


def notebook_settings_table() -> str:
    """The notebook's own settings: the ``HarnessNB`` traits no run setting makes."""
    traits = HarnessNB.class_traits(config=True)
    rows = [
        (name, _default(name, trait.default()), _cell(trait.help))
        for name, trait in traits.items()
        if name not in SETTINGS
    ]
    return _table(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs' hook: put the tables where a page asks for them."""
    if SETTINGS_MARK in markdown:
        markdown = markdown.replace(SETTINGS_MARK, settings_table())
    if NOTEBOOK_SETTINGS_MARK in markdown:
        markdown = markdown.replace(NOTEBOOK_SETTINGS_MARK, notebook_settings_table())
    return markdown
