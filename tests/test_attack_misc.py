"""Holes an attacker found (a prompt-injected agent, a hostile workdir), each reproduced for
real and closed: a rewind's diff showed a config file's password raw; code stuck in C that
holds the interpreter lock left run_python's result silent about why it overran."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from harness_nb.core.secret import REDACTED
from harness_nb.harness import Harness
from harness_nb.notebook.kernel import watchdog
from harness_nb.notebook.kernel.watchdog import TimedOut, Watchdog
from harness_nb.providers.scripted import ScriptedProvider
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)

YAML_PASSWORD = "yaml-Pa55word-4rewind"
INI_KEY = "ini-ap1-key-4rewind-77"
JSON_SECRET = "json-cl1ent-secret-4rewind"
TOML_TOKEN = "toml-auth-t0ken-4rewind"


async def test_a_rewind_diff_masks_the_credentials_of_the_config_files_it_brings_back(tmp_path: Path) -> None:
    """The agent empties four config files (no tool ever read them): the rewind's diff
    brings their lines back, credential-named values masked, the rest readable."""
    files = {
        "config.yaml": f'db:\n  conn:\n    password: "{YAML_PASSWORD}"\n    host: db.internal\n',
        "settings.ini": f"[service]\nurl = https://api.example.com\napi_key = {INI_KEY}\n",
        "app.json": json.dumps({"auth": {"client_secret": JSON_SECRET, "issuer": "https://id.example.com"}}),
        "pyproject.toml": f'[tool.deploy]\nauth_token = "{TOML_TOKEN}"\nregion = "eu-west-1"\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    empty = [{"tool_calls": [{"name": "write_file", "arguments": {"path": n, "content": "{}\n"}}]} for n in files]
    provider = ScriptedProvider([*empty, {"text": "tidied"}])
    h = Harness(provider, workdir=tmp_path, approval_policy="never", sandbox="off")
    OPEN.append(h)
    await h.run("tidy the configuration")
    preview = await h.rewind(1, dry_run=True)  # before the first call
    shown = str(preview)
    for value in (YAML_PASSWORD, INI_KEY, JSON_SECRET, TOML_TOKEN):
        assert value not in shown, shown
    assert f'+    password: "{REDACTED}"' in shown and f"+api_key = {REDACTED}" in shown
    assert f'+auth_token = "{REDACTED}"' in shown and REDACTED in shown.split("app.json")[-1]
    assert "+    host: db.internal" in shown and "+url = https://api.example.com" in shown  # the rest stays
    done = await h.rewind(1)
    assert (tmp_path / "config.yaml").read_text() == files["config.yaml"] and YAML_PASSWORD not in str(done)


def _backtracking_size(at_least: float) -> int:
    """How many ``a``s make ``(a+)+$`` on ``a…ab`` backtrack for ``at_least`` seconds here
    (each one more doubles the time): a size for the test, measured, not asserted."""
    started = time.perf_counter()
    re.match(r"(a+)+$", "a" * 16 + "b")
    once = max(time.perf_counter() - started, 1e-6)
    size = 16
    while once * 2 ** (size - 16) < at_least and size < 34:
        size += 1
    return size


def test_code_stuck_in_c_that_holds_the_interpreter_lock_is_told_to_the_model(monkeypatch):
    """A backtracking ``re.match`` holds the interpreter lock: the watchdog's own thread is
    frozen with everything else, so the person cannot be told while it runs. Once it
    returns, the watchdog knows how long it was held up and says so (``stuck_for``, which
    ``run_python`` puts in the model's result), then interrupts the code as usual."""
    monkeypatch.setattr(watchdog, "REPEAT", 0.1)
    size = _backtracking_size(4 * watchdog.STUCK_AFTER * watchdog.REPEAT)
    told: list[str] = []
    with pytest.raises(TimedOut), Watchdog(0.1, tell=told.append) as dog, dog.armed():
        re.match(r"(a+)+$", "a" * size + "b")
        for _ in range(10**9):  # back in Python: the interrupt lands here
            pass
    assert dog.fired and dog.stuck_for is not None
    assert told == []
