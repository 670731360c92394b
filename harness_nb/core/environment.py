"""The environment line of a system prompt, and how to take it out of a comparison.

The line says which Python, which system and which day it is. The engine writes it into
every system prompt; a cassette must still match a request after the day (or the machine)
has changed, so the providers compare prompts with the line replaced by a fixed
placeholder. Both sides use this module, so the format is written down once.
"""

from __future__ import annotations

import platform
import re
import sys
import time

__all__ = ["ENVIRONMENT_PLACEHOLDER", "current_environment_line", "environment_line", "normalise_environment"]

_FORMAT = "Environment: Python {python} on {system}; today is {today}."
# What each field may hold when the line is recognised in a text (a date is a day, not a time).
_FIELDS = {"python": r"\S+", "system": r"[^;\n]*", "today": r"\d{4}-\d{2}-\d{2}"}

ENVIRONMENT_PLACEHOLDER = _FORMAT
"""What ``normalise_environment`` puts where an environment line was: the unfilled format."""

_PATTERN = re.escape(_FORMAT)
for _name, _shape in _FIELDS.items():
    _PATTERN = _PATTERN.replace(re.escape("{" + _name + "}"), _shape)
_LINE = re.compile(f"^{_PATTERN}$", re.MULTILINE)
_PREFIX = _FORMAT.split("{", 1)[0]


def environment_line(python: str, system: str, today: str) -> str:
    """``Environment: Python 3.11.7 on Linux; today is 2026-12-01.`` (``today`` as YYYY-MM-DD)."""
    return _FORMAT.format(python=python, system=system, today=today)


def current_environment_line() -> str:
    """The environment line for this interpreter, this system and today's local date."""
    return environment_line(sys.version.split()[0], platform.system(), time.strftime("%Y-%m-%d"))


def normalise_environment(text: str) -> str:
    """``text`` with every environment line (a whole line of its own) replaced by
    ``ENVIRONMENT_PLACEHOLDER``, so two texts that differ only in the day or the machine
    compare equal."""
    if _PREFIX not in text:  # the common case, without running the pattern
        return text
    return _LINE.sub(lambda _: ENVIRONMENT_PLACEHOLDER, text)
