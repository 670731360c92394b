"""Secrets where they live (issue 18, item 5): values of credential-named keys in the
configuration files a tool reads are masked in its result and stay known for the session,
so a later base64, hex or reversed copy is masked too; ``.env`` files deep in the tree or in
a virtualenv are masked and hidden from ``bash``.

The runs are real: a scripted model calls the real ``read_file``, ``grep`` and ``bash``
(under bubblewrap: the sandbox tests' rule, skipped only where it cannot work), and what
the model was sent is searched for each secret and for its encodings."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from harness_nb.core.credential import (
    config_format,
    credentials_in_file,
    credentials_in_text,
    is_credential_key,
    named_config_files,
    names_config_file,
)
from harness_nb.core.secret import REDACTED, SECRETS, Secrets, encodings
from harness_nb.harness import Harness
from harness_nb.testing import ScriptedProvider
from harness_nb.tools import Tool, ToolContext, tool
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from sandbox_support import bwrap_sandbox

API_KEY = "cfg-api-9f8e7d6c5b4a3210"
DB_PASSWORD = "Tr0ub4dor-and-3"
INI_PASSWORD = "s3ttings-pa55word"
CONFIG_YAML = f"""service:
  url: https://api.example.com
  api_key: {API_KEY}
database:
  user: app
  password: "{DB_PASSWORD}"
"""
SETTINGS_INI = f"""[database]
host = localhost
password = {INI_PASSWORD}
"""


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


async def _results(
    tmp_path: Path,
    *calls: dict[str, Any],
    sandboxed: bool = True,
    extra_tools: Sequence[Tool] = (),
    checkpoints: bool = True,
) -> list[str]:
    """Run one turn of ``calls`` per step (each after the one before), then return every
    tool result the model was sent, in order."""
    provider = ScriptedProvider([*({"tool_calls": [c]} for c in calls), {"text": "done"}])
    h = Harness(
        provider,
        workdir=tmp_path,
        approval_policy="never",
        include_user_agents=False,
        sandbox=bwrap_sandbox() if sandboxed else "off",
        extra_tools=extra_tools,
        checkpoints=checkpoints,
    )
    OPEN.append(h)
    result = await h.run("look at the settings")
    assert result.final_text == "done"
    last = provider.requests[-1]
    return [m.content for m in last.messages if m.role == "tool"]


def _sent(results: list[str]) -> str:
    return json.dumps(results)


@pytest.fixture
def configured(tmp_path: Path) -> Path:
    (tmp_path / "config.yaml").write_text(CONFIG_YAML)
    (tmp_path / "settings.ini").write_text(SETTINGS_INI)
    return tmp_path


@pytest.mark.parametrize(
    "call",
    [
        _call("read_file", path="config.yaml"),
        _call("bash", command="cat config.yaml"),
        _call("grep", pattern="password|api_key", path="."),
    ],
    ids=["read_file", "bash cat", "grep"],
)
async def test_credentials_of_a_config_file_a_tool_reads_are_masked_in_its_result(
    configured: Path, call: dict[str, Any]
) -> None:
    (result,) = await _results(configured, call)
    assert "api_key" in result and "password" in result, result  # the keys stay readable
    assert API_KEY not in result and DB_PASSWORD not in result, result
    assert REDACTED in result
    if call["name"] == "grep":
        assert INI_PASSWORD not in result and "host = localhost" not in result


async def test_a_config_value_read_once_is_masked_later_also_encoded(configured: Path) -> None:
    """After ``grep password settings.ini``, the password stays known: ``base64``, ``xxd -p``
    and ``rev`` of the file show it encoded, and each copy is masked."""
    grep, b64, wrapped, hexed, reversed_ = await _results(
        configured,
        _call("grep", pattern="password", path="settings.ini"),
        _call("bash", command="base64 -w0 settings.ini"),
        _call("bash", command="printf 'ab' | cat - settings.ini | base64"),  # shifted by two bytes, wrapped
        _call("bash", command="xxd -p settings.ini"),
        _call("bash", command="rev settings.ini"),
    )
    assert INI_PASSWORD not in grep and "password" in grep
    raw = SETTINGS_INI.encode()
    assert base64.b64encode(raw).decode() not in b64 and b64.splitlines()[0] == REDACTED
    assert base64.b64encode(b"ab" + raw).decode()[:60] not in wrapped.replace("\n", "")
    assert raw.hex()[:40] not in hexed.replace("\n", "")
    assert "drowssap" in reversed_ and INI_PASSWORD[::-1] not in reversed_
    for result in (b64, wrapped, hexed, reversed_):
        assert REDACTED in result
        assert not any(form in result.replace("\n", "") for form in encodings(INI_PASSWORD))


async def test_a_config_value_in_upper_or_mixed_case_hex_is_masked(configured: Path) -> None:
    """Hex is hex in any case: ``xxd -p | tr a-f A-F`` (``hexlify(...).upper()``) and a mix of
    cases show the password as plainly as lower-case hex does."""
    upper, mixed = await _results(
        configured,
        _call("bash", command="xxd -p settings.ini | tr a-f A-F"),
        _call("bash", command="xxd -p settings.ini | tr ace ACE"),
    )
    for result in (upper, mixed):
        assert result.splitlines()[0] == REDACTED, result
        assert INI_PASSWORD.encode().hex() not in result.replace("\n", "").lower()


async def test_a_config_file_a_command_names_is_read_before_its_result_is_scrubbed(configured: Path) -> None:
    """``base64 settings.ini`` as the very first call: the file it names is read for its
    credentials first, so even its first, encoded, view of them is masked."""
    (b64,) = await _results(configured, _call("bash", command="base64 settings.ini"))
    assert b64.splitlines()[0] == REDACTED


async def test_a_dotenv_file_nine_folders_down_or_in_a_virtualenv_is_hidden_and_masked(tmp_path: Path) -> None:
    """Issue 18: such files were sent raw, and from depth 9 sandboxed bash read them too."""
    deep = tmp_path.joinpath(*"abcdefghi")
    deep.mkdir(parents=True)
    (deep / ".env").write_text("DEEP_SERVICE_TOKEN=deep-token-value-99\n")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "venv" / ".env").write_text("VENV_PASSWORD=venv-password-value-7\n")
    rel = "/".join("abcdefghi")
    read_deep, read_venv, cat = await _results(
        tmp_path,
        _call("read_file", path=f"{rel}/.env"),
        _call("read_file", path="venv/.env"),
        _call("bash", command=f"cat {rel}/.env venv/.env; echo end"),
    )
    assert "DEEP_SERVICE_TOKEN=[redacted]" in read_deep and "VENV_PASSWORD=[redacted]" in read_venv
    assert cat.splitlines()[0] == "end", "bash sees the files empty"
    assert "deep-token-value-99" not in _sent([read_deep, read_venv, cat])


FRESH_TOKEN = "fresh-token-7f3a9c2e5d"


@tool(name="add_service")
async def add_service(ctx: ToolContext, folder: str) -> str:
    """Set up a service folder with its .env; says what token it made (a tool that changes files)."""
    (ctx.workdir / folder).mkdir()
    (ctx.workdir / folder / ".env").write_text(f"SERVICE_TOKEN={FRESH_TOKEN}\n")
    return f"made {folder} with token {FRESH_TOKEN}"


@tool(name="encoded", read_only=True)
async def encoded(ctx: ToolContext, path: str) -> str:
    """A file's bytes in base64 (a read-only tool)."""
    return base64.b64encode((ctx.workdir / path).read_bytes()).decode()


async def test_a_dotenv_a_call_wrote_is_read_before_its_result_is_scrubbed(tmp_path: Path) -> None:
    """A call that may change files has the .env files read again before its result is
    scrubbed, even one right after another call's (a read-only call's result is scrubbed
    without that re-read): the token it wrote and shows bare is masked. (Checkpoints off:
    they would revert the .env, a protected file, before the result is read.)"""
    (tmp_path / "notes.txt").write_text("nothing secret\n")
    read, made = await _results(
        tmp_path,
        _call("read_file", path="notes.txt"),
        _call("add_service", folder="svc"),
        extra_tools=[add_service],
        checkpoints=False,
    )
    assert "nothing secret" in read
    assert made == f"made svc with token {REDACTED}"


async def test_a_config_file_a_read_only_call_names_is_read_first(configured: Path) -> None:
    """A read-only call is observed without a worker thread only when it names no
    configuration file: one that does has the file read first, so its encoded view of the
    file is masked."""
    (shown,) = await _results(configured, _call("encoded", path="settings.ini"), extra_tools=[encoded])
    assert shown == REDACTED


def test_credential_named_keys() -> None:
    for name in (
        "api_key", "apiKey", "API-KEY", "x-api-key", "password", "db_password", "PGPASSWORD", "passwd", "pwd",
        "client_secret", "secret", "auth", "Authorization", "auth_token", "accessToken", "token", "creds",
        "credentials", "aws_secret_access_key", "private_key", "ssh_key", "cookie", "passphrase", "key",
    ):
        assert is_credential_key(name), name
    for name in (
        "author", "authors", "tokenizer", "keyboard", "monkey", "primary_key", "sort_key", "public_key",
        "token_url", "password_file", "auth_type", "api_key_env", "secret_name", "host", "user", "max_depth",
    ):
        assert not is_credential_key(name), name


def test_each_format_is_read_for_its_credentials() -> None:
    assert credentials_in_file("config.yaml", CONFIG_YAML) == {API_KEY, DB_PASSWORD}
    assert credentials_in_file("settings.ini", SETTINGS_INI) == {INI_PASSWORD}
    yaml_lists = "api_keys:\n- first-key-123456\n- second-key-7890\nauth:\n  type: oauth-flow\n  client: abc-client-7\n"
    assert credentials_in_file("app.yml", yaml_lists) == {"first-key-123456", "second-key-7890", "abc-client-7"}
    document = {"db": {"password": "json-pass-1234"}, "tokens": ["tok-a-123456"], "name": "not-a-secret"}
    assert credentials_in_file("settings.json", json.dumps(document, indent=2)) == {"json-pass-1234", "tok-a-123456"}
    toml = '[tool.x]\napi_token = "toml-token-5678"\nauthors = ["Ann Smith"]\n'
    assert credentials_in_file("pyproject.toml", toml) == {"toml-token-5678"}
    assert credentials_in_file(".netrc", "machine h login me password netrc-pass-42\n") == {"netrc-pass-42"}
    assert credentials_in_file(".pgpass", "# comment\nhost:5432:db:me:pg\\:pass-99\n") == {"pg:pass-99"}
    assert credentials_in_file("broken.json", '{"token": "half-json-123456", "x": [') == {"half-json-123456"}
    assert credentials_in_file("t.yaml", "password: ${DB_PASSWORD}\ntoken: '{{ vault_token }}'\n") == set()
    assert (config_format("a/b/.env.local"), config_format("x.txt"), config_format("credentials")) == (
        "dotenv",
        None,
        "ini",
    )


def test_pairs_in_output_of_unknown_source_are_taken_only_when_they_read_as_values() -> None:
    text = "\n".join(
        [
            "settings.ini:3: password = grep-shown-pass-1",
            '{"token": "json-line-token-2", "count": 3}',
            "Authorization: Bearer header-bearer-3",
            "export SERVICE_API_KEY=exported-key-4",
            "--api-key=flag-value-5",
            "password = get_password()",
            "self.password = password",
            "api_key = os.environ['API_KEY']",
            "token = config.token",
            "secret = correcthorse",
            "auth_url: https://login.example.com",
        ]
    )
    assert credentials_in_text(text) == {
        "grep-shown-pass-1",
        "json-line-token-2",
        "header-bearer-3",
        "exported-key-4",
        "flag-value-5",
    }
    assert "correcthorse" in credentials_in_text("secret = correcthorse", strict=False)
    assert credentials_in_text("conf/app.ini:7: password = correcthorse\nsrc/app.py:3: password = fromcode") == {
        "correcthorse"
    }, "a search hit in a config file is that file's value"


def test_a_call_names_config_files_relative_or_absolute(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    for name in ("conf/app.yaml", "settings.ini", ".env.prod", "notes.txt"):
        (tmp_path / name).write_text("x: 1\n")
    named = named_config_files(
        ["cat conf/app.yaml | base64; head settings.ini notes.txt missing.yaml", f"{tmp_path}/.env.prod"], tmp_path
    )
    assert named == [tmp_path / "conf/app.yaml", tmp_path / "settings.ini", tmp_path / ".env.prod"]
    assert names_config_file(["cat ~/.aws/credentials"]) and names_config_file(["head _netrc"])
    assert names_config_file(['{"path": "deploy/.env.local"}']) and names_config_file(["less app.YAML"])
    assert not names_config_file(["grep -rn token src | sort", "notes.txt", "credentialsx", "env"])


def test_a_call_names_a_config_file_however_its_json_spells_it() -> None:
    """``needs_files`` reads the arguments' words without decoding JSON that has no
    escape; a name next to an escaped quote or newline, or behind a \\u escape, is seen."""
    secrets = Secrets(environ={})
    for arguments in (
        '{"path": "a.yaml"}',
        json.dumps({"command": 'cat "a.yaml"'}),
        json.dumps({"command": "cat a.yaml\nls"}),
        '{"path": "\\u002eenv"}',
        "not json: head settings.ini",
    ):
        assert secrets.needs_files(arguments, wrote=False), arguments
    assert not secrets.needs_files(json.dumps({"text": "hello world", "n": 3}), wrote=False)
    assert secrets.needs_files("{}", wrote=True)


def test_values_learned_stay_known_for_the_session_and_are_bounded() -> None:
    secrets = Secrets(environ={})
    assert secrets.learn(["learned-value-123", "short", "true", "/", REDACTED, f"'{REDACTED}'"])
    assert secrets.values() == {"learned-value-123"}
    secrets.refresh(files=True)
    assert secrets.scrub("x learned-value-123 y") == f"x {REDACTED} y"
    from harness_nb.core.secret import MAX_LEARNED

    secrets.learn(f"value-number-{i:06}" for i in range(MAX_LEARNED + 10))
    assert len(secrets.values()) == MAX_LEARNED and "learned-value-123" not in secrets.values()
    SECRETS.learn(["process-wide-value-1"])
    assert SECRETS.scrub("process-wide-value-1") == REDACTED


def test_encoded_copies_of_any_known_value_are_masked_and_other_text_is_not() -> None:
    secrets = Secrets(environ={"SERVICE_TOKEN": "env-token-value-1234"})
    for prefix in (b"", b"a", b"ab"):
        encoded = base64.b64encode(prefix + b"token=env-token-value-1234\n").decode()
        assert secrets.scrub(f"out: {encoded} end") == f"out: {REDACTED} end"
    assert secrets.scrub(b"env-token-value-1234".hex()) == REDACTED
    assert secrets.scrub(b"env-token-value-1234".hex().upper()) == REDACTED
    assert secrets.scrub(f"x {b'env-token-value-1234'.hex().title()} y") == f"x {REDACTED} y"
    assert secrets.scrub("4321-eulav-nekot-vne") == REDACTED
    plain = "c2VlIHRoZSBkb2NzCg== and 0123abcdef plain words"
    assert secrets.scrub(plain) == plain
