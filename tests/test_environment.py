"""The environment line: one format, built by the engine's prompt and recognised by the
cassette's matching, so a recorded prompt matches on any day and machine."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

from harness_nb.core.environment import (
    ENVIRONMENT_PLACEHOLDER,
    current_environment_line,
    environment_line,
    normalise_environment,
)
from harness_nb.engine.prompt import PromptBuilder


def test_the_line_and_the_current_one() -> None:
    assert environment_line("3.11.7", "Linux", "2026-12-01") == "Environment: Python 3.11.7 on Linux; today is 2026-12-01."
    current = current_environment_line()
    assert current.startswith(f"Environment: Python {sys.version.split()[0]} on {platform.system()}; today is ")
    assert normalise_environment(current) == ENVIRONMENT_PLACEHOLDER


def test_normalising_replaces_whole_environment_lines_only() -> None:
    text = "\n".join(
        [
            "Be brief.",
            environment_line("3.11.7", "Linux", "2026-12-01"),
            "Working directory: /w",
            environment_line("3.13.0rc1", "Windows", "2027-01-31"),
        ]
    )
    assert normalise_environment(text) == "\n".join(
        ["Be brief.", ENVIRONMENT_PLACEHOLDER, "Working directory: /w", ENVIRONMENT_PLACEHOLDER]
    )
    quoted = "the prompt said " + environment_line("3.11.7", "Linux", "2026-12-01")
    assert normalise_environment(quoted) == quoted  # not a line of its own: left alone
    not_a_day = "Environment: Python 3.11.7 on Linux; today is Tuesday."
    assert normalise_environment(not_a_day) == not_a_day
    assert normalise_environment("no such line") == "no such line"


def test_prompt_builder_uses_the_given_environment_line(tmp_path: Path) -> None:
    fixed = PromptBuilder("Be brief.", workdir=tmp_path, environment_line=lambda: environment_line("3.9.1", "Plan9", "2030-01-01"))
    assert fixed.build() == f"Be brief.\n\nWorking directory: {tmp_path}\n\nEnvironment: Python 3.9.1 on Plan9; today is 2030-01-01."
    assert normalise_environment(PromptBuilder("Be brief.", workdir=tmp_path).build()).endswith("\n\n" + ENVIRONMENT_PLACEHOLDER)
    assert "Environment:" not in PromptBuilder("Be brief.", workdir=tmp_path, environment=False).build()
