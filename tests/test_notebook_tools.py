"""The main agent's tools over the kernel's namespace, in a real ipykernel:
``inspect_variable`` stays bounded whatever it looks at, and ``run_python`` asks first.

How a live view coalesces a fast stream is tested with a hand-moved clock in
``test_views.py``; the widget messages a second it sends in a kernel are measured, not
asserted, by ``benchmarks/bench_kernel.py``.

The tests share the module's kernel, each with a fresh harness; those that interrupt the
kernel start their own."""

from __future__ import annotations

import importlib.util

import pytest

from notebook_support import (
    error_name,
    fresh_harness,
    kernel_json,
    model_requests,
    notebook,
    result_text,
    tool_results,
    wait_for_widget_text,
)

pytestmark = [pytest.mark.kernel, pytest.mark.asyncio(loop_scope="module")]

NAMESPACE = """
class Point:
    def __init__(self):
        self.x, self.y = 1, 2
    def __repr__(self):
        return "Point(x=1, y=2)"

point = Point()
numbers = list(range(10_000))
table = {f"key{i}": i * i for i in range(500)}
big = "spam and eggs " * 200_000
"""


def _inspect(name: str, call_id: str) -> dict[str, object]:
    return {"id": call_id, "name": "inspect_variable", "arguments": {"name": name}}


async def test_inspect_variable_is_bounded_and_run_python_asks(kernel, tmp_path):
    """``list_variables`` and ``inspect_variable`` describe the notebook's objects (type,
    length, a preview) in a few KB even for a 2.8 MB string; an unknown name gets the list of
    variables. ``run_python`` shows an approval card first and, once approved, runs in the
    user namespace."""
    script = {
        "agents": {
            "main": [
                {
                    "tool_calls": [
                        {"id": "vars", "name": "list_variables", "arguments": {}},
                        _inspect("point", "point"),
                        _inspect("numbers", "numbers"),
                        _inspect("table", "table"),
                        _inspect("big", "big"),
                        _inspect("nothing_here", "missing"),
                    ]
                },
                {"tool_calls": [{"name": "run_python", "arguments": {"code": "answer = 41 + 1\nprint('set')\nanswer"}}]},
                {"text": "answer is now 42."},
            ]
        }
    }
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run(NAMESPACE)
    run = k.execute("%%agent\nlook at my variables, then set answer")
    card = await wait_for_widget_text(k, "Approve run_python?")
    assert "run_python always asks for approval" in card and "answer = 41 + 1" in card
    k.click(await k.wait_for_button("Approve"))
    await k.finished(run)
    assert result_text(run) == "answer is now 42."
    assert result_text(await k.run("answer")) == "42"

    requests = await model_requests(k, "main")
    listing, point, numbers, table, big, missing = tool_results(requests[1])
    assert "point: Point" in listing and "numbers: list len 10000" in listing
    assert "table: dict len 500" in listing and "big: str len 2800000" in listing
    assert "Point" not in listing.split("point: Point")[0], "classes are not listed as variables"
    assert point == "type: __main__.Point\nrepr: Point(x=1, y=2)"
    assert numbers.startswith("type: list\nlength: 10000\nfirst items: [0, 1, 2")
    assert table.startswith("type: dict\nlength: 500\nitems:\n  'key0': 0\n  'key1': 1")
    assert big.startswith("type: str\nlength: 2,800,000 characters\ntext: 'spam and eggs")
    assert "nothing_here" in missing and "big, numbers, point, table" in missing
    for result in (listing, point, numbers, table, big):
        assert len(result) <= 4_100, len(result)
    assert tool_results(requests[2])[-1] == "set\n42\nstatus: ok"


@pytest.mark.skipif(
    importlib.util.find_spec("numpy") is None or importlib.util.find_spec("pandas") is None,
    reason="numpy and pandas are not installed",
)
async def test_inspect_variable_on_arrays_and_dataframes(kernel, tmp_path):
    """For an array: shape, dtype and values with the middle elided; for a DataFrame: shape,
    dtypes, the head and the missing values — bounded for a million rows."""
    script = {"agents": {"main": [{"tool_calls": [_inspect("arr", "arr"), _inspect("df", "df")]}, {"text": "seen"}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run(
        "import numpy as np, pandas as pd\n"
        "arr = np.arange(1_000_000, dtype='int64').reshape(1000, 1000)\n"
        "df = pd.DataFrame({'a': range(1_000_000), 'b': ['x'] * 1_000_000})\n"
        "df.loc[3, 'b'] = None"
    )
    await k.run("%%agent\nlook at arr and df")
    arr, df = tool_results((await model_requests(k, "main"))[1])
    assert "shape: (1000, 1000)" in arr and "dtype: int64" in arr and "..." in arr
    assert "shape: (1000000, 2)" in df and "a: int64" in df
    assert "b: object" in df or "b: str" in df  # pandas 3 infers a string dtype
    assert "head(5):" in df and "missing values: {'b': 1}" in df
    assert len(arr) <= 4_100 and len(df) <= 4_100


async def test_credential_named_variables_and_mapping_keys_are_masked(kernel, tmp_path):
    """Issue 18: ``inspect_variable`` showed ``db_password`` and ``creds["token"]`` as they
    are. Now a credential-named variable is shown by type (and a mapping's keys) only, a
    short one too; elsewhere a mapping's values under credential-named keys are masked at
    any depth; and the values are known from then on: ``run_python`` printing them shows
    them masked."""
    script = {
        "agents": {
            "main": [
                {
                    "tool_calls": [
                        {"id": "vars", "name": "list_variables", "arguments": {}},
                        _inspect("db_password", "db_password"),
                        _inspect("db_pwd", "db_pwd"),
                        _inspect("creds", "creds"),
                        _inspect("config", "config"),
                    ]
                },
                {"tool_calls": [{"name": "run_python", "arguments": {"code": "print(db_password, creds)"}}]},
                {"text": "seen"},
            ]
        }
    }
    secrets = ("Tr0ub4dor-and-3x", "abc", "tok-9f8e7d6c5b4a", "nested-pw-12345")
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run("%config HarnessNB.approval_policy = 'never'")
    await k.run(
        f"db_password = {secrets[0]!r}\ndb_pwd = {secrets[1]!r}\n"
        f"creds = {{'user': 'ann', 'token': {secrets[2]!r}}}\n"
        f"config = {{'db': {{'host': 'localhost', 'password': {secrets[3]!r}}}, 'retries': 3}}"
    )
    await k.run("%%agent\nlook at my variables")
    requests = await model_requests(k, "main")
    listing, password, pwd, creds, config = tool_results(requests[1])
    (printed,) = tool_results(requests[2])[-1:]
    assert "db_password: str (value masked)" in listing and "config: dict len 2" in listing
    assert password.startswith("type: str\nvalue: [redacted] (the name 'db_password' looks like a credential")
    assert pwd.startswith("type: str\nvalue: [redacted]")
    assert creds.startswith("type: dict\nkeys: ['user', 'token']\nvalue: [redacted]")
    assert "'host': 'localhost'" in config and "'password': [redacted]" in config
    assert printed == "[redacted] {'user': 'ann', 'token': '[redacted]'}\nstatus: ok"
    for result in (listing, password, pwd, creds, config, printed):
        assert not any(secret in result for secret in secrets if secret != "abc"), result
    assert "abc" not in pwd


NESTED_CREDENTIALS = """
from collections import namedtuple
from dataclasses import dataclass
from types import SimpleNamespace

@dataclass
class Settings:
    api_token: str
    region: str = "eu-west-1"

class Slotted:
    __slots__ = ("user", "password")
    def __init__(self, user, password):
        self.user, self.password = user, password
    def __repr__(self):
        return f"Slotted({self.user!r}, {self.password!r})"

Login = namedtuple("Login", "user password")
cfg = {"prod": {"db": {"primary": {"conn": {"options": {"password": "Pw1dEEp"}, "host": "db1"}}}}}
settings = Settings("Tk2dAtA")
env = SimpleNamespace(name="prod", db=SimpleNamespace(password="Pw3nSpc"))
rows = [{"user": "ann", "password": "Pw4lIst"}, Settings("Tk5lIst")]
login = Login("ann", "Pw6nTup")
slotted = Slotted("ann", "Pw7sLot")
wide = {"group": {"password": "Pw8wIde", **{f"k{i}": i for i in range(300)}}}
"""
NESTED_SECRETS = ("Pw1dEEp", "Tk2dAtA", "Pw3nSpc", "Pw4lIst", "Tk5lIst", "Pw6nTup", "Pw7sLot", "Pw8wIde", "Pw9fRam")


async def test_credentials_nested_at_any_depth_never_reach_the_model(kernel, tmp_path):
    """The attacker's finding: masking looked at the variable's name and a mapping's keys
    a few levels down. Short values (which ``Secrets`` does not learn) at any depth — in a
    deep dict, a dataclass or namespace attribute, a list of dicts and objects, a
    namedtuple, a ``__slots__`` object, a wide dict, a DataFrame column — are not in any
    tool result the model gets; the rest of each value still shows."""
    names = ["cfg", "settings", "env", "rows", "login", "slotted", "wide"]
    pandas = importlib.util.find_spec("pandas") is not None
    names += ["frame"] if pandas else []
    calls = [{"id": "vars", "name": "list_variables", "arguments": {}}, *(_inspect(n, n) for n in names)]
    script = {"agents": {"main": [{"tool_calls": calls}, {"text": "seen"}]}}
    k = await fresh_harness(kernel, tmp_path, script)
    await k.run(NESTED_CREDENTIALS)
    if pandas:
        await k.run("import pandas as pd\nframe = pd.DataFrame({'user': ['ann'], 'Password': ['Pw9fRam']})")
    await k.run("%%agent\nlook at my variables")
    results = tool_results((await model_requests(k, "main"))[1])
    assert len(results) == len(names) + 1
    for result in results:
        assert not any(secret in result for secret in NESTED_SECRETS), result
    shown = dict(zip(names, results[1:], strict=True))
    assert "'host': 'db1'" in shown["cfg"] and "[redacted]" in shown["cfg"]
    assert "region='eu-west-1'" in shown["settings"] and "name='prod'" in shown["env"]
    assert "'ann'" in shown["login"] and "'ann'" in shown["slotted"] and "'ann'" in shown["rows"]
    if pandas:
        assert "ann" in shown["frame"] and "[redacted]" in shown["frame"]


async def test_run_python_is_interrupted_at_the_tool_timeout_and_the_kernel_goes_on(tmp_path):
    """Issue 18: ``time.sleep(15)`` with a 3 s ``tool_timeout`` took 15 s, and ``while True:
    pass`` hung the kernel. Past the timeout each is interrupted as the stop button does (a
    ``KeyboardInterrupt`` the code can clean up on), the model is told, and the kernel keeps
    its variables and runs the next cell. Shown by outcome: had the sleep finished,
    ``finished`` would be set; had the loop not been stopped, the cell would never end."""
    sleep = "started = True\nimport time\ntry:\n    time.sleep(15)\nfinally:\n    cleaned = True\nfinished = True"
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"name": "run_python", "arguments": {"code": sleep}}]},
                {"tool_calls": [{"name": "run_python", "arguments": {"code": "print('spinning')\nwhile True: pass"}}]},
                {"text": "both stopped"},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.approval_policy = 'never'\n%config HarnessNB.tool_timeout = 2")
        run = await k.run("%%agent\nrun these", timeout=120)
        assert result_text(run) == "both stopped"
        requests = await model_requests(k, "main")
        slept, spun = tool_results(requests[2])
        assert result_text(await k.run("(started, cleaned, 'finished' in dir())")) == "(True, True, False)"
        assert result_text(await k.run("1 + 1")) == "2"
    timed_out = "error: run_python stopped: the code ran past the tool timeout (2 s) and was interrupted"
    assert slept.startswith(f"{timed_out} at line 4, as the stop button does; the variables it set before")
    assert "%config HarnessNB.tool_timeout = <seconds>" in slept
    assert spun.startswith(f"{timed_out} at line 2,")
    assert spun.endswith("What it printed before:\nspinning")


async def test_code_stuck_in_c_is_reported_once_and_the_kernel_goes_on(tmp_path):
    """The attacker's finding: code stuck in C never returns to Python, so the watchdog's
    interrupts go unheard and the kernel looks hung without a word. ``pbkdf2_hmac`` runs in C
    (the interpreter lock released) and ignores SIGINT until it ends: after three unanswered
    interrupts the cell says so, once, with how to stop it; the model's result says so when
    the call ends; the kernel then runs the next cell. The call is sized in the kernel to
    outlast many interrupts (the watchdog's interval is shortened there to keep this short)."""
    derive = "import hashlib\nkey = hashlib.pbkdf2_hmac('sha256', b'pw', b'salt', int(rate * 6))\nlen(key)"
    call = {"name": "run_python", "arguments": {"code": derive}}
    script = {"agents": {"main": [{"tool_calls": [call]}, {"text": "stuck, noted"}]}}
    async with notebook(tmp_path, script) as k:
        await k.run(
            "%config HarnessNB.approval_policy = 'never'\n%config HarnessNB.tool_timeout = 0.5\n"
            "import hashlib, time\nimport harness_nb.notebook.kernel.watchdog as watchdog\nwatchdog.REPEAT = 0.25\n"
            "started = time.perf_counter()\nhashlib.pbkdf2_hmac('sha256', b'pw', b'salt', 200_000)\n"
            "rate = 200_000 / (time.perf_counter() - started)"
        )
        run = await k.run("%%agent\nderive the key", timeout=120)
        assert result_text(run) == "stuck, noted"
        (result,) = tool_results((await model_requests(k, "main"))[1])
        assert result_text(await k.run("1 + 1")) == "2"
    told = "".join(out["text"] for out in run.outputs if out["msg_type"] == "stream" and out["name"] == "stderr")
    assert told.count("run_python has ignored 3 interrupts for ") == 1, told
    assert "stuck in C code, which no interrupt stops. Restart the kernel (Kernel ▸ Restart) to stop it" in told
    assert result.startswith("error: run_python stopped: the code ran past the tool timeout (0.5 s)"), result
    assert "The interrupts went unanswered for " in result and "stuck in C code" in result


async def test_the_stop_button_stops_run_python_code_that_never_ends(tmp_path):
    """The person's stop, while run_python spins in ``while True: pass`` (well inside its
    timeout), interrupts the code and the run at once; the kernel answers the next cell."""
    spin = "open('spinning', 'w').close()\nwhile True: pass"
    call = {"name": "run_python", "arguments": {"code": spin}}
    script = {"agents": {"main": [{"tool_calls": [call]}, {"text": "never"}]}}
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.approval_policy = 'never'\n%config HarnessNB.tool_timeout = 600")
        run = k.execute("%%agent\nspin")
        await k.wait_for(lambda: (tmp_path / "spinning").exists(), what="the code to start spinning")
        await k.interrupt()
        await k.finished(run, timeout=60)
        assert run.status == "error" and error_name(run) in ("CancelledError", "KeyboardInterrupt"), k.error(run)
        assert result_text(await k.run("1 + 1")) == "2"


async def test_run_python_ends_with_a_status_line_naming_the_tables_it_showed(tmp_path):
    """A run that worked ends ``status: ok`` with the shape of each table it displayed (by
    ``display`` and as its last value); one that raised ends with the exception and its
    line, after a traceback of the code's own frames with their source lines. The formatter
    that notes the shapes is gone once the call is over."""
    frame = "pd.DataFrame({'temp_c': [1.0, 2.0, 3.0], 'precipitation_mm': [0, 1, 2]})"
    shows = f"weather = {frame}\ndisplay(weather.head(2))\nweather"
    script = {
        "agents": {
            "main": [
                {"tool_calls": [{"name": "run_python", "arguments": {"code": shows}}]},
                {"tool_calls": [{"name": "run_python", "arguments": {"code": "total = 1\nweather['precip'].mean()"}}]},
                {"text": "Done."},
            ]
        }
    }
    async with notebook(tmp_path, script) as k:
        await k.run("%config HarnessNB.approval_policy = 'never'\nimport pandas as pd")
        await k.run("%%agent\nload the weather")
        formatters = await kernel_json(k, "sorted(get_ipython().display_formatter.formatters)")
        _, shown, failed = await model_requests(k, "main")
    assert tool_results(shown)[-1].endswith("\nstatus: ok · displayed DataFrame 2×2, DataFrame 3×2")
    error = tool_results(failed)[-1]
    assert error.startswith("error: Traceback") and "weather['precip'].mean()" in error
    assert "harness_nb" not in error, "the harness's own frames are not the model's business"
    assert error.endswith("\nstatus: raised KeyError: 'precip' at line 2; the lines before it ran")
    assert not [f for f in formatters if "harness" in f]
