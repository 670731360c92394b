"""API keys never appear in an error, a repr, a log line or a cassette (provider part)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from harness_nb.core import AssistantMessage, ProviderError, ToolCall, ToolResultMessage, UserMessage
from harness_nb.core import dotenv as dotenv_module
from harness_nb.core.dotenv import MAX_BYTES, parse_dotenv, scan_dotenv
from harness_nb.core.secret import (
    REDACTED,
    RedactingFilter,
    Secrets,
    could_be_secret,
    environment_secrets,
    is_secret_name,
    looks_random,
    scrub,
    scrub_shapes,
)
from harness_nb.engine import MemorySession
from harness_nb.providers import ModelRequest, create_provider
from harness_nb.providers.http import RetryPolicy
from harness_nb.testing.fake_server import FakeLLMServer

pytestmark = pytest.mark.usefixtures("no_provider_env")

KEY = "sk-proj-Zq81xVb2Lm0PqRsTuVwXyZ4455667788"
REQUEST = ModelRequest(system="", messages=[UserMessage(content="hi")])


async def no_sleep(delay: float) -> None:
    pass


def error_body(message: str) -> str:
    """An API's JSON error body carrying ``message``."""
    return json.dumps({"error": {"message": message}})


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-x"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_key_echoed_by_the_server_is_never_shown(
    model: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with FakeLLMServer([{"fault": "unauthorized", "echo_key": True}]) as srv:
        provider = create_provider(model, api_key=KEY, base_url=srv.url)
        with pytest.raises(ProviderError) as info:
            if streaming:
                async for _ in provider.stream(REQUEST):
                    pass
            else:
                await provider.complete(REQUEST)
        await provider.aclose()
    assert KEY in srv.requests[0].api_key  # the server did see it, and echoed it back
    error = info.value
    assert "[redacted]" in str(error)
    for shown in (str(error), repr(error), error.message, repr(provider), str(vars(provider)), caplog.text):
        assert KEY not in shown
        assert KEY[8:20] not in shown


async def test_partly_masked_echo_is_scrubbed_too(caplog: pytest.LogCaptureFixture) -> None:
    echoed = f"Incorrect API key provided: {KEY[:12]}****************{KEY[-4:]}"
    step = {"raw": error_body(echoed), "status": 401, "content_type": "application/json"}
    async with FakeLLMServer([step]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url)
        with pytest.raises(ProviderError) as info:
            await provider.complete(REQUEST)
        await provider.aclose()
    assert KEY[:12] not in str(info.value)
    assert "check OPENAI_API_KEY" in str(info.value)


async def test_retry_log_lines_hold_no_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    step = {"raw": error_body(f"overloaded for key {KEY}"), "status": 503, "content_type": "application/json"}
    async with FakeLLMServer([step, {"text": "ok"}]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, retry=RetryPolicy(sleep=no_sleep))
        assert (await provider.complete(REQUEST)).message.content == "ok"
        await provider.aclose()
    assert "retry 1 of 3" in caplog.text
    assert KEY not in caplog.text and "[redacted]" in caplog.text


async def test_cassettes_hold_no_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-another-key-00112233")
    leaky = ModelRequest(
        system="",
        messages=[UserMessage(content=f"env says OPENAI_API_KEY={KEY} and sk-ant-another-key-00112233")],
    )
    async with FakeLLMServer([{"text": f"I saw {KEY}"}]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, record_to=tmp_path / "c.jsonl")
        await provider.complete(leaky)
        await provider.aclose()
    text = (tmp_path / "c.jsonl").read_text()
    assert KEY not in text and "sk-ant-another-key-00112233" not in text
    assert "authorization" not in text.lower()


def test_scrub() -> None:
    assert scrub(f"key={KEY}.", [KEY]) == "key=[redacted]."
    assert scrub(f"got '{KEY[:10]}…{KEY[-6:]}'", [KEY]) == "got '[redacted]'"
    assert scrub("nothing to see", [KEY, ""]) == "nothing to see"


# -- the one mechanism: Secrets ------------------------------------------------------------------
#
# What counts as a secret (names, values, shapes, .env files), how a change is noticed, and
# that every way out (messages, logs) goes through it. The end-to-end leak tests are in
# test_secret_leaks.py.

RANDOM = "Zq81xVb2Lm0PqRsTuVwXyZ4455667788"
OTHER = "Hw5Tk3Pn7Bc1Mx9Vd2Fg6Jr4Ls8Qy0Ue"  # shares nothing with KEY


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AZURE_OPENAI_KEY", "GH_TOKEN",
        "DB_PASSWORD", "MYSQL_PWD_PASSWD", "GPG_PASSPHRASE", "GOOGLE_CREDENTIALS", "DOCKER_AUTH_CONFIG",
        "SSH_PRIVATE", "SESSION_COOKIE", "slack_bot_token", "APIKEY", "HF_TOKEN", "JUPYTER_TOKEN",
    ],
)  # fmt: skip
def test_credential_names_are_recognised_anywhere_in_the_name(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "SSH_AUTH_SOCK", "XAUTHORITY", "GPG_AGENT_INFO", "KEYTIMEOUT", "TOKENIZERS_PARALLELISM",
        "GIT_AUTHOR_NAME", "GIT_COMMITTER_EMAIL", "PATH", "HOME", "OPENAI_BASE_URL", "PWD", "LANG",
    ],
)  # fmt: skip
def test_known_non_secrets_and_ordinary_names_are_not(name: str) -> None:
    assert not is_secret_name(name)


def test_values_that_cannot_be_secrets(tmp_path: Path) -> None:
    for value in ["", "abc", "true", "False", "disabled", "12345678", "3.14159265", "-1e10", str(tmp_path)]:
        assert not could_be_secret(value), value
    assert not could_be_secret(f"{tmp_path}{os.pathsep}{tmp_path}")
    for value in [RANDOM, "hunter2hunter2", "/no/such/path/for/a/secret", "correct horse battery staple"]:
        assert could_be_secret(value), value
    env = {
        "AWS_SECRET_ACCESS_KEY": RANDOM,
        "TOKENIZERS_PARALLELISM": "false-positive-if-read",
        "SSH_AUTH_SOCK": "/no/such/socket/anywhere",
        "MY_TOKEN": "true",
        "DEBUG_KEY_COUNT": "12345678",
        "LANG": "C.UTF-8-but-long",
    }
    assert environment_secrets(env) == [RANDOM]


def test_random_looking_values() -> None:
    assert looks_random(RANDOM) and looks_random("x" * 16 + "B1") and looks_random("0123456789abcdef" * 2)
    for value in ["checkpoint-1000-final", "my-fancy-app-name", "0123456789abcdef", "Has Spaces 123 Abc xyz"]:
        assert not looks_random(value), value


@pytest.mark.parametrize(
    "key",
    [
        "sk-" + "aB3" * 16, "sk-proj-" + "Xy9_" * 30, "sk-ant-api03-" + "Qw8-" * 20, "AKIA" + "IOSFODNN7EXAMPLE",
        "ASIA" + "Y3FJKWQ2ZC5P7T4E", "ghp_" + "aB1" * 12, "gho_" + "Zz9" * 12, "github_pat_11" + "AbC" * 25,
        "xoxb-123456789012-abcdefABCDEF", "xoxp-1-2-3-abcdefghij", "AIza" + "SyD-" * 8 + "abc",
        "hf_" + "AbCdEfGhIj" * 3 + "kl", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc", "rk_test_" + "a1B2c3D4e5F6g7H8",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ],
)  # fmt: skip
def test_strings_shaped_like_keys_are_masked_wherever_they_appear(key: str) -> None:
    text = f"before {key} after\n'{key}'\nKEY={key}"
    clean = scrub_shapes(text)
    assert key not in clean and clean.count(REDACTED) == 3
    assert clean.startswith("before [redacted] after")


@pytest.mark.parametrize(
    "text",
    [
        '<background-task-completed id="bg-1">done</background-task-completed>',
        "pip install sk-learn-compatible-estimators",
        "a disk-0123456789abcdefghijklmnop label",
        "AKIAIOSFODNN7EXAMPLEX9 is too long for an access key id",
        "thigh_" + "a" * 40,
        "https://example.com:8080/path@v1 and git@github.com:org/repo.git",
    ],
)
def test_ordinary_text_that_resembles_a_shape_is_left_alone(text: str) -> None:
    assert scrub_shapes(text) == text


def test_private_key_blocks_and_url_passwords() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow" + "A" * 58 + "\nQk9C\n-----END RSA PRIVATE KEY-----"
    assert scrub_shapes(f"key:\n{pem}\nafter") == "key:\n[redacted]\nafter"
    head = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
    assert scrub_shapes(f"$ head -2 id_ed25519\n{head}\n$ ls") == "$ head -2 id_ed25519\n[redacted]\n$ ls"
    assert scrub_shapes("postgres://app:s3cr3t-pw@db:5432/x") == "postgres://app:[redacted]@db:5432/x"
    assert scrub_shapes("origin https://x-access-token:abc123def@github.com/o/r") == (
        "origin https://x-access-token:[redacted]@github.com/o/r"
    )


def test_dotenv_parsing() -> None:
    text = (
        "# comment\n"
        "PLAIN=value one  # trailing comment\n"
        "export EXPORTED=exported-value\n"
        "SINGLE='literal \\n # not a comment'\n"
        'DOUBLE="line\\nbreak \\"quoted\\""\n'
        'MULTI="-----BEGIN KEY-----\nabc\n-----END KEY-----"\n'
        "  SPACED = padded  \n"
        "EMPTY=\n"
        "not an assignment\n"
        "HASH=abc#def\n"
    )
    assert parse_dotenv(text) == {
        "PLAIN": "value one",
        "EXPORTED": "exported-value",
        "SINGLE": "literal \\n # not a comment",
        "DOUBLE": 'line\nbreak "quoted"',
        "MULTI": "-----BEGIN KEY-----\nabc\n-----END KEY-----",
        "SPACED": "padded",
        "EMPTY": "",
        "HASH": "abc#def",
    }


def test_dotenv_walk_is_bounded_and_safe(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("A_TOKEN=top-level-token-1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".env.production").write_text("B_SECRET=nested-secret-2\n")
    (tmp_path / "sub" / "app.env").write_text("C_PASSWORD=compose-password-3\n")
    for skipped in (".git", "node_modules", "venv/lib/python3.11/site-packages/pkg"):
        (tmp_path / skipped).mkdir(parents=True)
        (tmp_path / skipped / ".env").write_text("SKIPPED_KEY=never-read-5\n")
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)  # never followed
    os.mkfifo(tmp_path / ".env.fifo")  # opening it for reading must not hang
    (tmp_path / ".env.big").write_text("BIG_KEY=big-file-head-6\n" + "#" * (2 * MAX_BYTES) + "\nTAIL_KEY=tail-7\n")
    scan = scan_dotenv(tmp_path)
    values = {v for _, v in scan.pairs()}
    assert values == {"top-level-token-1", "nested-secret-2", "compose-password-3", "big-file-head-6"}
    assert not scan.changed() and not scan.truncated


def test_dotenv_files_are_found_at_any_depth_and_in_virtualenvs(tmp_path: Path) -> None:
    """Issue 18: a .env nine folders down, or in venv/ or .venv/, held values sent raw."""
    deep = tmp_path.joinpath(*"abcdefghi")
    deep.mkdir(parents=True)
    (deep / ".env").write_text("DEEP_API_KEY=deep-down-value-9\n")
    for venv in ("venv", ".venv/bin"):
        (tmp_path / venv).mkdir(parents=True)
        (tmp_path / venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (tmp_path / venv / ".env").write_text(f"VENV_TOKEN=in-{venv.replace('/', '-')}-value\n")
    secrets = Secrets(environ={})
    secrets.watch(tmp_path)
    assert secrets.values() == {"deep-down-value-9", "in-venv-value", "in-.venv-bin-value"}
    assert secrets.scrub("deep-down-value-9 in-venv-value") == f"{REDACTED} {REDACTED}"


def test_the_dotenv_walk_stops_at_its_bound_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At a bound of 40 folders: the real one (``MAX_DIRS``) is thousands, and making that
    many folders cost more than the rest of the file."""
    monkeypatch.setattr(dotenv_module, "MAX_DIRS", 40)
    for i in range(40 + 5):
        (tmp_path / f"d{i:05}").mkdir()
    scan = scan_dotenv(tmp_path, read=False)
    assert scan.truncated and len(scan.folders) == 40


def test_a_dotenv_scan_relists_only_what_changed(tmp_path: Path) -> None:
    """``update`` notices a .env added deep down, edited or removed, and a folder removed."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    scan = scan_dotenv(tmp_path)
    assert not scan.update() and scan.paths() == []
    (tmp_path / "a" / "b" / "c").mkdir()
    (tmp_path / "a" / "b" / "c" / ".env").write_text("NEW_SECRET=added-later-1\n")
    assert scan.update() and {v for _, v in scan.pairs()} == {"added-later-1"}
    env = tmp_path / "a" / "b" / "c" / ".env"
    env.write_text("NEW_SECRET=edited-later-22\n")
    os.utime(env, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert scan.update() and {v for _, v in scan.pairs()} == {"edited-later-22"}
    (tmp_path / "a" / "unrelated.txt").write_text("x")
    assert not scan.update(), "a folder relisted, but no .env changed"
    env.unlink()
    (tmp_path / "a" / "b" / "c").rmdir()
    assert scan.update() and scan.paths() == [] and str(tmp_path / "a" / "b" / "c") not in scan.folders


def test_dotenv_values_count_when_named_like_credentials_or_random(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        f"DB_PASSWORD=postgres\nDB_HOST=localhost\nAPP_NAME=my-fancy-app\nDEBUG=true\nWEBHOOK={RANDOM}\n"
    )
    secrets = Secrets(environ={})
    secrets.watch(tmp_path)
    assert secrets.values() == {"postgres", RANDOM}
    assert secrets.scrub("localhost my-fancy-app postgres") == f"localhost my-fancy-app {REDACTED}"


def test_a_key_exported_later_is_noticed_on_the_next_scrub() -> None:
    env: dict[str, str] = {"HOME": "/home/x"}
    secrets = Secrets(environ=env)
    assert secrets.scrub(f"say {RANDOM}") == f"say {RANDOM}"
    version = secrets.version
    env["HOME"] = "/home/y"  # a change, but no new secret: the set stays the same
    assert secrets.scrub(RANDOM) == RANDOM and secrets.version == version
    env["LATE_API_KEY"] = RANDOM
    assert secrets.scrub(f"say {RANDOM}") == f"say {REDACTED}" and secrets.version == version + 1
    del env["LATE_API_KEY"]
    assert secrets.scrub(RANDOM) == RANDOM  # gone from the environment: no longer masked


def test_os_environ_changes_are_noticed_too(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = Secrets()
    secrets.refresh()
    monkeypatch.setenv("SOME_SERVICE_CREDENTIAL", RANDOM)
    assert secrets.scrub(RANDOM) == REDACTED


def test_an_edited_dotenv_file_is_reread(tmp_path: Path) -> None:
    secrets = Secrets(environ={}, file_interval=3600)
    secrets.watch(tmp_path)
    assert secrets.scrub(RANDOM) == RANDOM
    (tmp_path / ".env").write_text(f"NEW_TOKEN={RANDOM}\n")
    assert secrets.scrub(RANDOM) == RANDOM  # not looked at again within file_interval …
    secrets.refresh(files=True)  # … unless asked (the redacting hook asks before each tool result)
    assert secrets.scrub(RANDOM) == REDACTED
    (tmp_path / ".env").write_text("NEW_TOKEN=another-token-value\n")
    os.utime(tmp_path / ".env", ns=(time.time_ns(), time.time_ns() + 10**9))
    secrets.refresh(files=True)
    assert secrets.scrub(f"{RANDOM} another-token-value") == f"{RANDOM} {REDACTED}"


def test_keys_added_are_masked_also_when_echoed_in_part() -> None:
    secrets = Secrets(environ={})
    secrets.add(KEY, None, "short")
    assert secrets.scrub(f"key {KEY}; echoed {KEY[:12]}****{KEY[-4:]}") == f"key {REDACTED}; echoed {REDACTED}"
    assert "short" not in secrets.values()
    assert KEY not in repr(secrets)


def test_a_clean_message_is_kept_and_a_dirty_one_rebuilt_with_valid_json_arguments() -> None:
    secrets = Secrets(environ={"MY_TOKEN": RANDOM})
    clean = ToolResultMessage(tool_call_id="c1", name="bash", content="nothing here")
    assert secrets.scrub_message(clean) is clean
    call = ToolCall(id="c2", name="bash", arguments=json.dumps({"command": f'curl -H "X: {RANDOM}" x'}))
    dirty = AssistantMessage(content=f"using {RANDOM}", tool_calls=(call,))
    fixed = secrets.scrub_message(dirty)
    assert fixed.content == f"using {REDACTED}"
    assert json.loads(fixed.tool_calls[0].arguments) == {"command": f'curl -H "X: {REDACTED}" x'}
    assert (fixed.tool_calls[0].id, fixed.tool_calls[0].name) == ("c2", "bash")


def test_a_session_scrubs_what_joins_it_and_catches_up_once_when_the_secrets_change(tmp_path: Path) -> None:
    env: dict[str, str] = {}
    secrets = Secrets(environ=env)
    session = MemorySession(transcript=tmp_path / "t.jsonl", secrets=secrets)
    first = ToolResultMessage(tool_call_id="c1", name="read_file", content=f"token {RANDOM}")
    assert session.append(first) is first  # not a secret yet
    env["LATE_TOKEN"] = RANDOM
    stored = session.append(ToolResultMessage(tool_call_id="c2", name="read_file", content=f"again {RANDOM}"))
    assert stored.content == f"again {REDACTED}"
    session.record("run_failed", error=f"ValueError: {RANDOM}")
    session.rescrub()
    assert [m.content for m in session.messages] == [f"token {REDACTED}", f"again {REDACTED}"]
    kept = session.messages[1]
    session.rescrub()  # nothing changed since: the same objects
    assert session.messages[1] is kept
    session.close()
    lines = (tmp_path / "t.jsonl").read_text()
    assert lines.count(RANDOM) == 1  # only the line written before the key was known


def test_log_records_are_scrubbed_by_the_filter(caplog: pytest.LogCaptureFixture) -> None:
    secrets = Secrets(environ={"MY_TOKEN": RANDOM})
    logger = logging.getLogger("harness_nb.test-filter")
    logger.addFilter(RedactingFilter(secrets))
    try:
        with caplog.at_level(logging.DEBUG, logger="harness_nb.test-filter"):
            logger.warning("token %s in %r", RANDOM, {"k": RANDOM})
            try:
                raise ValueError(f"bad token {RANDOM}")
            except ValueError:
                logger.exception("failed")
    finally:
        logger.filters.clear()
    assert RANDOM not in caplog.text and caplog.text.count(REDACTED) >= 3


def test_every_harness_nb_logger_masks_credentials(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The loggers the package uses (each gets the filter: a parent's filter does not see a
    child logger's records) are all named in ``LOGGER_NAMES``, so each is masked from the
    moment ``core.secret`` is imported, whichever module creates it later and whatever ran
    before (the test once passed only when other tests had imported every module)."""
    import ast

    import harness_nb
    from harness_nb.core.secret import LOGGER_NAMES

    package = Path(harness_nb.__file__).parent
    used = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getLogger" and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    used.add(arg.value)
                elif isinstance(arg, ast.Name) and arg.id == "__name__":
                    used.add(".".join(("harness_nb", *path.relative_to(package).with_suffix("").parts)))
    assert used and all(name.startswith("harness_nb") for name in used)
    assert used <= set(LOGGER_NAMES), f"add {sorted(used - set(LOGGER_NAMES))} to LOGGER_NAMES in core/secret.py"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", RANDOM)
    caplog.set_level(logging.DEBUG)
    for name in LOGGER_NAMES:
        logging.getLogger(name).warning("%s sees %s", name, RANDOM)
    assert RANDOM not in caplog.text
    assert caplog.text.count(REDACTED) == len(LOGGER_NAMES)


# -- providers: error messages, retry logs and cassettes use the same secrets -------------------


async def test_a_server_echoing_any_known_credential_is_scrubbed_in_errors_and_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Not only the provider's own key: a server (or a proxy in front of it) may echo what
    the request held, e.g. an AWS secret a tool printed."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", OTHER)
    overloaded = {"raw": error_body(f"busy; saw {OTHER}"), "status": 503, "content_type": "application/json"}
    denied = {"raw": error_body(f"bad token {OTHER}"), "status": 401, "content_type": "application/json"}
    async with FakeLLMServer([overloaded, denied]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, retry=RetryPolicy(sleep=no_sleep))
        with pytest.raises(ProviderError) as info:
            await provider.complete(REQUEST)
        await provider.aclose()
    assert "retry 1 of 3" in caplog.text and "bad token [redacted]" in str(info.value)
    assert OTHER not in caplog.text and OTHER not in str(info.value)


async def test_a_cassette_holds_no_credential_of_any_kind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_KEY", OTHER)
    aws_id = "AKIA" + "QWERTYUIOPASDFGH"
    answer = f"Found {OTHER} and {aws_id}."
    async with FakeLLMServer([{"text": answer}]) as srv:
        provider = create_provider("openai/gpt-4o", api_key=KEY, base_url=srv.url, record_to=tmp_path / "c.jsonl")
        await provider.complete(ModelRequest(system=f"system {OTHER}", messages=[UserMessage(content=aws_id)]))
        await provider.aclose()
    text = (tmp_path / "c.jsonl").read_text()
    assert OTHER not in text and aws_id not in text and KEY not in text
    assert text.count("[redacted]") == 4
