"""``python -m harness_nb`` as a new user meets it: help that reads as plain text, a
missing model named as the flag to pass, whole descriptions or an ellipsis, and the demo's
transcript in full. Run as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from harness_nb.cli import _line


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k != "HARNESS_NB_MODEL"}
    return subprocess.run(
        [sys.executable, "-m", "harness_nb", *args], capture_output=True, text=True, timeout=120, env={**clean, **(env or {})}
    )


def test_help_is_plain_text_and_every_command_says_what_it_does():
    top = cli("--help")
    assert top.returncode == 0
    assert "``" not in top.stdout
    for command, words in {"run": "main agent", "demo": "offline", "agents": "list the subagents"}.items():
        assert any(line.strip().startswith(command) and words in line for line in top.stdout.splitlines()), top.stdout
    run = cli("run", "--help")
    assert "--model" in run.stdout and "--workdir" in run.stdout and "prompt" in run.stdout


def test_run_without_a_model_names_the_flag_and_the_variable_not_python_or_config():
    result = cli("run", "summarise data.csv")
    assert result.returncode == 2
    assert "--model" in result.stderr and "HARNESS_NB_MODEL" in result.stderr
    assert "Harness(" not in result.stderr and "%config" not in result.stderr


@pytest.mark.parametrize(
    ("text", "width", "expected"),
    [
        ("short one", 20, "short one"),
        ("Reviews notebook and project code for correctness", 30, "Reviews notebook and project…"),
        ("   spread\n over  lines ", 40, "spread over lines"),
    ],
)
def test_a_long_description_is_cut_at_a_word_with_an_ellipsis(text, width, expected):
    assert _line(text, width) == expected
    assert len(_line(text, width)) <= width


def test_the_demo_prints_its_whole_transcript():
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    transcript = result.stdout.split("── transcript ──", 1)[1]
    assert "| revenue | 1440.00      | float                     |" in transcript  # the table's last row
