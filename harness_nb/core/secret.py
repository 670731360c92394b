"""Keeping credentials out of everything a person or a model reads: ``Secrets``.

One ``Secrets`` — the process's is ``SECRETS`` — knows every credential the process can see:

- keys handed to it (``add``): a harness's ``api_key``, the key every HTTP provider holds;
- environment variables whose names look like credentials (``is_secret_name``: KEY, TOKEN,
  SECRET, PASSWORD, CREDENTIAL, AUTH, … anywhere in the name, minus ``NOT_SECRET_NAMES``),
  read afresh whenever ``os.environ`` changes, so a key exported after start-up is covered;
- values in ``.env`` files under the watched working directories (``watch``, ``dotenv.py``),
  re-read when one is written, added or removed;
- values learned from what tools read (``learn``, ``observe_call``): credential-named keys
  of the configuration files a call names and of the key/value pairs its output shows
  (``credential.py``), of the files a rewind's diff shows (``learn_file``), and
  credential-named notebook variables. They stay known for the
  session (the most recent ``MAX_LEARNED``);
- and, in any text, strings shaped like known keys (``SHAPES``: OpenAI, Anthropic, AWS,
  GitHub, Slack, Google, Hugging Face, Stripe, JWTs, private-key blocks, URL passwords).

``scrub(text)`` replaces all of them with ``[redacted]`` — also copied reversed, as hex, or
in base64 at any alignment (inside a whole file's ``base64`` or ``xxd -p``, lines wrapped or
not: the whole encoded block is redacted); everything bound for a model, a transcript, an
offload file, a cassette, a widget or a log passes through it (DESIGN §2.1).

It is cheap enough to call on every message: noticing that the environment changed costs
one dict comparison (about 0.5 µs for 40 variables); the ``.env`` files are re-stated at
most every ``file_interval`` seconds unless a caller asks (``refresh(files=True)``); the
scrubber is rebuilt only when the set of values changed (``version`` counts the changes).
A value cannot be a secret when it is short, a boolean, a number or an existing path
(``could_be_secret``): masking those would garble ordinary output.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from .credential import (
    config_format,
    credentials_in_file,
    credentials_in_text,
    named_config_files,
    names_config_file,
    read_config,
)
from .dotenv import MAX_BYTES as MAX_DOTENV_BYTES
from .dotenv import DotenvScan, parse_dotenv, scan_dotenv
from .fs import read_regular
from .message import AssistantMessage, MessageT, ToolCall
from .scrubber import MIN_LENGTH, REDACTED, SHAPES, Scrubber, encodings, scrub, scrub_shapes

__all__ = [
    "NOT_SECRET_NAMES",
    "REDACTED",
    "SECRETS",
    "SHAPES",
    "RedactingFilter",
    "Secrets",
    "could_be_secret",
    "encodings",
    "environment_secrets",
    "file_credentials",
    "is_secret_name",
    "looks_random",
    "protect_loggers",
    "scrub",
    "scrub_shapes",
]

MAX_WATCHED = 8  # working directories whose .env files are kept current
MAX_LEARNED = 256  # values learned from what tools read (each costs every scrub a few searches)
MAX_LEARNED_CHARS = 4096

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|PASSPHRASE|CRED|AUTH|PRIVATE|COOKIE")
NOT_SECRET_NAMES = frozenset(
    {
        "SSH_AUTH_SOCK", "XAUTHORITY", "GPG_AGENT_INFO", "KEYTIMEOUT", "TOKENIZERS_PARALLELISM",
        "GNOME_KEYRING_CONTROL", "GNOME_KEYRING_PID", "PIP_KEYRING_PROVIDER", "UV_KEYRING_PROVIDER",
        "PYTHON_KEYRING_BACKEND", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "AWS_CREDENTIAL_EXPIRATION",
        "AWS_SHARED_CREDENTIALS_FILE", "GOOGLE_APPLICATION_CREDENTIALS", "KEYMAP", "XKB_DEFAULT_KEYMAP",
    }
)  # fmt: skip
_NOT_SECRET_PREFIXES = ("GIT_AUTHOR_", "GIT_COMMITTER_")  # names, e-mails and dates
_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "none", "null", "enabled", "disabled", "required"})
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"[0-9a-fA-F]+")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` holds a credential: KEY, TOKEN,
    SECRET, PASSW(ORD), PASSPHRASE, CRED(ENTIAL), AUTH, PRIVATE or COOKIE anywhere in it
    (``AWS_SECRET_ACCESS_KEY``, ``AZURE_OPENAI_KEY``, ``GH_TOKEN``), except the known
    non-secrets (``SSH_AUTH_SOCK``, ``KEYTIMEOUT``, ``GIT_AUTHOR_NAME``, …)."""
    upper = name.upper()
    if upper in NOT_SECRET_NAMES or upper.startswith(_NOT_SECRET_PREFIXES):
        return False
    return _SECRET_NAME.search(upper) is not None


def could_be_secret(value: str) -> bool:
    """False for values that cannot be credentials, whatever the variable is called: shorter
    than 8 characters, a boolean word, a number, or existing paths (``/run/user/1000/…``)."""
    v = value.strip()
    if len(v) < MIN_LENGTH or v.lower() in _WORDS or _NUMBER.fullmatch(v):
        return False
    return not _existing_paths(v)


def _existing_paths(value: str) -> bool:
    if "\n" in value or len(value) > 4096:
        return False
    parts = value.split(os.pathsep)
    for part in parts:
        if not part or not (part.startswith(("/", "~", ".")) or os.sep in part):
            return False
        try:
            if not os.path.exists(os.path.expanduser(part)):
                return False
        except (OSError, ValueError):
            return False
    return True


def looks_random(value: str) -> bool:
    """Whether ``value`` looks like a generated key: at least 16 characters without spaces
    mixing lower case, upper case and digits, or 32+ hex digits. A ``.env`` value is a
    secret when its name looks like a credential or it looks random (``DB_HOST=localhost``
    and ``APP_NAME=my-app`` are not masked everywhere)."""
    if len(value) < 16 or any(c.isspace() for c in value):
        return False
    if _HEX.fullmatch(value):
        return len(value) >= 32
    return any(c.islower() for c in value) and any(c.isupper() for c in value) and any(c.isdigit() for c in value)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of the environment variables that hold credentials (``is_secret_name`` and
    ``could_be_secret``)."""
    env = os.environ if environ is None else environ
    return [v for k, v in env.items() if is_secret_name(k) and could_be_secret(v)]


def file_credentials(name: str, text: str) -> set[str]:
    """The credentials in ``text``, the content of a file called ``name``: a ``.env``'s
    secret values, a configuration file's credential-named ones (``credential.py``), the
    credential-named pairs of any other text, as a tool's output is read."""
    kind = config_format(name)
    if kind == "dotenv":
        return _dotenv_secrets(parse_dotenv(text[:MAX_DOTENV_BYTES]).items())
    return credentials_in_file(name, text) if kind is not None else credentials_in_text(text)


def _dotenv_secrets(pairs: Iterable[tuple[str, str]]) -> set[str]:
    found = set()
    for name, value in pairs:
        value = value.strip()
        if (is_secret_name(name) or looks_random(value)) and could_be_secret(value):
            found.add(value)
    return found


class Secrets:
    """Every credential the process can see (see the module docstring), kept current.

    ``environ`` is read for credential-like variables (``os.environ`` unless given: tests
    pass a dict). ``file_interval`` is how often, at most, ``.env`` files are re-stated when
    nobody asks for it. Safe to use from several threads."""

    def __init__(self, *, environ: Mapping[str, str] | None = None, file_interval: float = 0.5) -> None:
        self._environ: Mapping[str, str] = os.environ if environ is None else environ
        self.file_interval = file_interval
        self._keys: set[str] = set()
        self._learned: dict[str, None] = {}  # oldest first
        self._env_seen: dict[Any, Any] | None = None
        self._env_values: frozenset[str] = frozenset()
        self._scans: dict[Path, DotenvScan] = {}
        self._files_checked = float("-inf")
        self._scrubber = Scrubber.of(())
        self._lock = threading.RLock()
        self.version = 0

    # -- what is known ----------------------------------------------------------------------

    def add(self, *values: str | None) -> None:
        """Know these values (keys handed to a harness or held by a provider) from now on."""
        new = {v for v in values if v and len(v) >= MIN_LENGTH} - self._keys
        if new:
            with self._lock:
                self._keys |= new
                self._rebuild()

    def watch(self, workdir: str | Path) -> None:
        """Keep the ``.env`` files under ``workdir`` known: a bounded walk now, again when a
        folder walked or a file read changes. The last ``MAX_WATCHED`` folders given are
        watched (a folder that disappears is dropped)."""
        root = Path(workdir).expanduser().resolve()
        with self._lock:
            if root in self._scans:
                self._scans[root] = self._scans.pop(root)  # most recently used last
                return
            self._scans[root] = scan_dotenv(root)
            while len(self._scans) > MAX_WATCHED:
                del self._scans[next(iter(self._scans))]
            self._rebuild()

    def learn(self, values: Iterable[str]) -> bool:
        """Know these values from now on, for the session: credentials a tool read (the most
        recent ``MAX_LEARNED`` are kept). Values that cannot be secrets are left out. True
        when something new was learned."""
        new = []
        for value in values:
            value = value.strip()
            # a result's masked pairs (``password: '[redacted]'``) teach nothing
            if len(value) <= MAX_LEARNED_CHARS and REDACTED not in value and could_be_secret(value):
                new.append(value)
        if not new:
            return False
        with self._lock:
            before = set(self._learned)
            for value in new:
                self._learned.pop(value, None)  # learned again: the most recent now
                self._learned[value] = None
            while len(self._learned) > MAX_LEARNED:
                del self._learned[next(iter(self._learned))]
            return self._learned.keys() != before and self._rebuild()

    def observe_call(self, arguments: str, output: str, workdir: Path) -> bool:
        """Learn what one tool call read, before its result is scrubbed: the credentials of
        the configuration and ``.env`` files its ``arguments`` (JSON text) name — read from
        the files themselves, so a result showing them encoded is caught too — and those of
        the key/value pairs its ``output`` shows (``credential.py``). Re-reads the watched
        ``.env`` files too. Blocking (it reads files): call it off the event loop. True when
        the secrets changed."""
        changed = self.refresh(files=True)
        found = credentials_in_text(output)
        for path in named_config_files(_argument_strings(arguments), workdir):
            found |= _dotenv_file(path) if config_format(path.name) == "dotenv" else read_config(path)
        return self.learn(found) or changed

    def learn_file(self, name: str, text: str) -> bool:
        """Learn the credentials of ``text``, the content of a file called ``name`` about to
        be shown (``file_credentials``): a rewind's diff shows a file's past content, which
        no tool may have read. True when something new was learned."""
        return self.learn(file_credentials(name, text))

    def needs_files(self, arguments: str, *, wrote: bool) -> bool:
        """Whether ``observe_call`` has files to look at for a call: it may have written one
        (``wrote``: a ``.env`` among them), or its ``arguments`` name a configuration file.
        Text only, so a call that needs neither is observed on the event loop
        (``observe_output``) instead of waiting for a worker thread; the ``.env`` files are
        then re-read on ``file_interval``, as before any scrub."""
        if wrote:
            return True
        # JSON without a backslash holds its strings as they are: its words are read undecoded
        return names_config_file([arguments] if "\\" not in arguments else _argument_strings(arguments))

    def observe_output(self, output: str) -> bool:
        """Learn the credentials of the key/value pairs ``output`` shows: ``observe_call``
        for a call that ``needs_files`` says has none to read. True when the secrets
        changed."""
        return self.learn(credentials_in_text(output))

    def clear(self) -> None:
        """Forget the keys added, the values learned and the folders watched (the
        environment is still read): each test starts from a clean slate."""
        with self._lock:
            self._keys.clear()
            self._learned.clear()
            self._scans.clear()
            self._rebuild()

    def values(self) -> frozenset[str]:
        """Every value masked now (current environment, watched files, keys added)."""
        self.refresh()
        return self._scrubber.values

    def refresh(self, *, files: bool = False) -> bool:
        """Re-read what may have changed: the environment always (when it changed), the
        ``.env`` files when ``files`` or ``file_interval`` has passed. True when the set of
        secrets changed."""
        changed = False
        raw = getattr(self._environ, "_data", self._environ)  # os.environ's own dict: no decoding
        if raw != self._env_seen:
            with self._lock:
                self._env_seen = dict(raw)
                values = frozenset(environment_secrets(self._environ))
                if values != self._env_values:
                    self._env_values = values
                    changed = True
        if self._scans and (files or time.monotonic() - self._files_checked >= self.file_interval):
            self._files_checked = time.monotonic()
            with self._lock:
                for root, scan in list(self._scans.items()):
                    if scan.update():
                        changed = True
                    if not root.is_dir():  # the folder is gone (a finished test's tmp_path, say)
                        del self._scans[root]
                        changed = True
        if changed:
            with self._lock:
                return self._rebuild()
        return False

    def _rebuild(self) -> bool:
        """Recompile from the keys, the values learned, the environment's values and the
        files' values (keys and learned values stay known; environment and file values are
        those present now)."""
        values = set(self._keys) | set(self._learned) | self._env_values
        for scan in self._scans.values():
            values |= _dotenv_secrets(scan.pairs())
        scrubber = Scrubber.of(values, keys=self._keys)
        if scrubber.values == self._scrubber.values:
            return False
        self._scrubber = scrubber
        self.version += 1
        return True

    # -- scrubbing ---------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        """``text`` without any known secret or string shaped like a key."""
        self.refresh()
        return self._scrubber(text) if text else text

    def scrub_data(self, value: Any) -> Any:
        """``value`` (JSON-like: dicts, lists, strings) with every string scrubbed."""
        self.refresh()
        return _map_strings(value, self._scrubber)

    def scrub_arguments(self, arguments: str) -> str:
        """Tool-call arguments (JSON text) scrubbed value by value, so they stay valid JSON."""
        self.refresh()
        return self._arguments(arguments, self._scrubber)

    def scrub_message(self, message: MessageT) -> MessageT:
        """``message`` itself when it holds no secret, else a new message with its text (and
        a call's arguments) scrubbed. New, not ``model_copy``: a copy would keep the old
        message's wire-form cache. Every message joining a conversation passes here: the
        usual one, holding nothing, is checked text by text and returned as it is."""
        self.refresh()
        scrub = self._scrubber
        content = message.content
        if type(message) is not AssistantMessage:
            clean = scrub(content) if content else content
            return message if clean == content else type(message)(**{**dict(message), "content": clean})
        assistant = cast(AssistantMessage, message)
        if not _holds_secret(assistant, scrub):
            return message
        calls = tuple(self._call(c, scrub) for c in assistant.tool_calls)
        # a thinking block is scrubbed too, though its signature then no longer checks out
        # (the API may refuse that turn): a key must not reach the transcript
        thinking = tuple(
            t if scrub(t.text) == t.text else t.model_copy(update={"text": scrub(t.text)}) for t in assistant.thinking
        )
        clean = scrub(content) if content else content
        return cast(MessageT, AssistantMessage(content=clean, tool_calls=calls, thinking=thinking))

    @staticmethod
    def _arguments(arguments: str, scrub: Scrubber) -> str:
        clean = scrub(arguments)
        if clean == arguments:
            return arguments
        try:
            return json.dumps(_map_strings(json.loads(arguments), scrub), ensure_ascii=False)
        except ValueError:
            return clean

    def _call(self, call: ToolCall, scrub: Scrubber) -> ToolCall:
        arguments = self._arguments(call.arguments, scrub)
        return call if arguments == call.arguments else ToolCall(id=call.id, name=call.name, arguments=arguments)

    def __repr__(self) -> str:  # never the values
        known, folders = len(self._scrubber.values), len(self._scans)
        return f"<Secrets {known} values, {folders} folders watched, version {self.version}>"


def _argument_strings(arguments: str) -> list[str]:
    """The strings of a tool call's arguments (the text itself when it is not JSON)."""
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return [arguments]
    return list(_strings(parsed))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _dotenv_file(path: Path) -> set[str]:
    try:
        data = read_regular(path, MAX_DOTENV_BYTES)
    except OSError:
        return set()
    return file_credentials(path.name, data[:MAX_DOTENV_BYTES].decode("utf-8", errors="replace"))


def _holds_secret(message: AssistantMessage, scrub: Scrubber) -> bool:
    """Whether ``scrub`` changes any text of ``message`` (plain loops: every answer passes here)."""
    if message.content and scrub(message.content) != message.content:
        return True
    for call in message.tool_calls:
        if scrub(call.arguments) != call.arguments:
            return True
    for block in message.thinking:
        if scrub(block.text) != block.text:
            return True
    return False


def _map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list | tuple):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


SECRETS = Secrets()
"""The process's secrets: what harnesses, providers, sessions, cassettes, views and the
``harness_nb`` loggers scrub with."""


# -- logs -------------------------------------------------------------------------------------


class RedactingFilter(logging.Filter):
    """Scrubs a log record's message, exception text and stack (never drops a record)."""

    def __init__(self, secrets: Secrets) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: logging reports it itself
            return True
        clean = self.secrets.scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.secrets.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = self.secrets.scrub(record.stack_info)
        return True


# Every logger name the package uses (a test holds the list complete): each is masked from
# this module's import on, whenever the module that logs to it is imported.
LOGGER_NAMES = (
    "harness_nb",
    "harness_nb.engine",
    "harness_nb.permission",
    "harness_nb.checkpoints",
    "harness_nb.providers",
    "harness_nb.tools",
    "harness_nb.sandbox",
    "harness_nb.subagents",
    "harness_nb.team",
    "harness_nb.mcp",
    "harness_nb.notebook",
    "harness_nb.tracing",
)
_FILTER = RedactingFilter(SECRETS)


def protect_loggers(package: str = "harness_nb") -> None:
    """Put the redacting filter on every logger of ``package`` that exists (a filter on a
    parent logger does not see its children's records, so each gets its own). Another
    package: a library harness_nb hands credentials to (the MCP SDK, its server headers)."""
    known = LOGGER_NAMES if package == "harness_nb" else (package,)
    names = {*known, *(n for n in logging.root.manager.loggerDict if n.startswith(package + "."))}
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


protect_loggers()
