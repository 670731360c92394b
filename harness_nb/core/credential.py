"""Credentials in configuration files and in tool output: which keys name one
(``is_credential_key``), and the values such keys hold.

A key names a credential when one of its words is a credential word (``key``, ``token``,
``secret``, ``password``, ``credential``, ``auth``, ``cookie``, …; words split at ``_``,
``-``, ``.`` and camelCase, so ``apiKey``, ``DB_PASSWORD`` and ``x-auth-token`` count and
``author``, ``tokenizer`` and ``keyboard`` do not) — unless its last word says the value
only describes one (``token_url``, ``password_file``, ``auth_type``, ``api_key_env``) or
``key`` means a database or lookup key (``primary_key``, ``sort_key``, ``public_key``).

Where the values are found:

- ``credentials_in_file(name, text)``, a file of a known format (``config_format``): JSON
  and TOML parsed whole; YAML and INI-style files (``.ini``, ``.cfg``, ``.conf``,
  ``.properties``, ``.npmrc``, AWS ``credentials``) line by line, keeping track of the
  mapping or section a line belongs to; ``.netrc`` (``password`` and ``account`` tokens)
  and ``.pgpass`` (the fifth field). A string counts when its own key names a credential,
  or when a key above it does (``credentials: {prod: …}``) and its own key is not a
  describing one (``auth: {type: …}``).
- ``credentials_in_text(text)``, any text whose source is unknown (a command's output):
  ``key: value``, ``key = value``, ``"key": "value"``, ``KEY=value``, ``--api-key=value``
  and ``Authorization: Bearer value`` pairs. The value must read as a literal: quoted, or a
  bare word that is not code (``get_password()``, ``self.password``, ``os.environ[…]``, a
  word without digits, another credential's name) nor a template (``${X}``, ``{{ x }}``) —
  unless the line is a search hit in a config file (``settings.ini:3: password = …``).
- ``named_config_files(texts, workdir)``: the files of a known format a tool call names
  (a ``read_file`` path, a file in a ``bash`` command), so their values can be learned
  from the file itself before the call's result is scrubbed — also when the result shows
  them transformed (``base64 settings.ini``).

Everything is bounded: at most ``MAX_CONFIG_BYTES`` of a file, ``MAX_HITS`` pairs per text,
``MAX_NAMED`` files per call. What counts as a secret value (long enough, not a number or a
path) is ``Secrets``' decision, not this module's.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .dotenv import is_dotenv_name
from .fs import read_regular

__all__ = [
    "MAX_CONFIG_BYTES",
    "config_format",
    "credentials_in_file",
    "credentials_in_text",
    "is_credential_key",
    "named_config_files",
    "read_config",
]

MAX_CONFIG_BYTES = 256 * 1024
MAX_HITS = 2_000  # credential-word occurrences looked at in one text
MAX_NAMED = 16  # config files read for one tool call
MAX_VALUE_CHARS = 512
_MAX_DEPTH = 32  # nesting followed in a parsed JSON or TOML document

_CREDENTIAL_WORDS = frozenset(
    {
        "key", "keys", "apikey", "apikeys", "token", "tokens", "secret", "secrets", "password",
        "passwords", "passwd", "pass", "pwd", "passphrase", "credential", "credentials", "creds",
        "cred", "auth", "authorization", "oauth", "cookie", "cookies", "jwt", "bearer",
    }
)  # fmt: skip
# Credential words written glued to another word (PGPASSWORD, clientsecret, privatekey).
_GLUED = re.compile(
    r"passw|secret|credential|passphrase|api_?keys?|private_?key|access_?key|(?:auth|access|refresh)_?token"
)
# A last word that makes the value a description of a credential, not the credential.
_DESCRIBING = frozenset(
    {
        "type", "types", "method", "mode", "url", "uri", "endpoint", "host", "hostname", "port",
        "provider", "scheme", "file", "filename", "path", "dir", "folder", "name", "names", "header",
        "id", "enabled", "required", "length", "len", "expiry", "expires", "expiration", "ttl",
        "timeout", "env", "var", "variable", "field", "column", "prefix", "suffix", "format",
        "version", "kind", "strategy", "backend", "policy", "plugin", "class", "module", "command",
        "cmd", "count", "limit", "size", "max", "min", "location", "store", "storage", "source",
        "hint", "help", "label", "description", "placeholder", "prompt", "message", "msg", "text",
        "error", "regex", "pattern", "manager", "helper", "service", "server", "issuer",
        "audience", "scope", "scopes", "flow", "grant", "realm", "domain", "user", "username",
        "login", "email", "algorithm", "alg", "encoding", "cache", "dtype",
    }
)  # fmt: skip
# Words before "key" that make it a database, lookup or public key.
_NOT_SECRET_KEY = frozenset(
    {
        "primary", "foreign", "sort", "partition", "range", "hash", "cache", "public", "lookup",
        "join", "group", "index", "unique", "composite", "natural", "surrogate", "dict", "map",
        "row", "column", "idempotency", "hot", "shortcut", "cluster", "distribution", "dedup",
    }
)  # fmt: skip
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SPLIT = re.compile(r"[^a-z0-9]+")


def _words(name: str) -> list[str]:
    return [w for w in _SPLIT.split(_CAMEL.sub("_", name).lower()) if w]


def is_credential_key(name: str) -> bool:
    """Whether a key (or variable) called ``name`` holds a credential (see the module doc)."""
    words = _words(name)
    if not words or words[-1] in _DESCRIBING:
        return False
    for i, word in enumerate(words):
        if word in ("key", "keys") and i > 0 and words[i - 1] in _NOT_SECRET_KEY:
            continue
        if word in _CREDENTIAL_WORDS:
            return True
    return _GLUED.search("_".join(words)) is not None


# -- formats ----------------------------------------------------------------------------------

_BY_SUFFIX = {
    ".json": "json", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".ini": "ini", ".cfg": "ini",
    ".conf": "ini", ".properties": "ini",
}  # fmt: skip
_BY_NAME = {
    ".netrc": "netrc", "_netrc": "netrc", ".pgpass": "pgpass", "credentials": "ini", ".npmrc": "ini",
    ".pypirc": "ini", ".boto": "ini", ".s3cfg": "ini",
}  # fmt: skip
_UNDOTTED = tuple(name for name in _BY_NAME if "." not in name)  # dotenv names all have one


def config_format(name: str) -> str | None:
    """The format of a file called ``name`` (a path or a bare name) whose credentials this
    module reads: ``json``, ``toml``, ``yaml``, ``ini``, ``netrc``, ``pgpass``, ``dotenv``;
    ``None`` for any other file."""
    if "." not in name and not name.endswith(_UNDOTTED):
        return None  # most words of a command: every other name known has a dot
    base = os.path.basename(name)
    if base in _BY_NAME:
        return _BY_NAME[base]
    if is_dotenv_name(base):
        return "dotenv"
    return _BY_SUFFIX.get(os.path.splitext(base)[1].lower())


def credentials_in_file(name: str, text: str) -> set[str]:
    """The values of credential-named keys in ``text``, the content of a file called
    ``name`` (read by its format, see the module doc; any text by the pairs it holds). A
    ``.env`` file is ``Secrets``' to read: here it is read as any text."""
    kind = config_format(name)
    text = text[:MAX_CONFIG_BYTES]
    if kind == "json":
        try:
            return set(_strings_under_credentials(json.loads(text)))
        except (ValueError, RecursionError):
            return credentials_in_text(text, strict=False)
    if kind == "toml":
        try:
            return set(_strings_under_credentials(tomllib.loads(text)))
        except (ValueError, RecursionError):
            return set(_indented_pairs(text, sections=True))
    if kind in ("yaml", "ini"):
        return set(_indented_pairs(text, sections=kind == "ini"))
    if kind == "netrc":
        return _netrc(text)
    if kind == "pgpass":
        return _pgpass(text)
    return credentials_in_text(text, strict=False)


def read_config(path: Path) -> set[str]:
    """The credentials in the file at ``path`` (at most ``MAX_CONFIG_BYTES`` of it; nothing
    when it is not a readable regular file)."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES)
    except OSError:
        return set()
    return credentials_in_file(path.name, data[:MAX_CONFIG_BYTES].decode("utf-8", errors="replace"))


def _strings_under_credentials(value: Any, inside: bool = False, depth: int = 0) -> Iterator[str]:
    """Every string of a parsed document under a credential-named key (see the module doc)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, str):
        if inside:
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            key = str(key)
            own = is_credential_key(key)
            below = own or (inside and not _describing(key))
            yield from _strings_under_credentials(item, below, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_under_credentials(item, inside, depth + 1)


def _describing(key: str) -> bool:
    words = _words(key)
    return bool(words) and words[-1] in _DESCRIBING


_YAML_KEY = re.compile(
    r"^(?P<indent>[ \t]*)(?P<dash>-[ \t]+)?(?P<key>[^\s:#=\[\]{}\"'][^:=]*?|\"[^\"]+\"|'[^']+')"
    r"[ \t]*[:=](?:[ \t]+(?P<value>.*))?$"
)
_YAML_ITEM = re.compile(r"^(?P<indent>[ \t]*)-[ \t]+(?P<value>.+)$")
_SECTION = re.compile(r"^\s*\[+(?P<name>[^\]]+)\]+\s*$")


def _indented_pairs(text: str, *, sections: bool) -> Iterator[str]:
    """Values of YAML block mappings and INI-style ``key = value`` lines, each with the keys
    (or section) above it: a line-by-line reading that a partial or templated file cannot
    break (and no YAML alias can blow up)."""
    stack: list[tuple[int, bool]] = []  # (indent, under a credential key) of the open keys
    section = False  # an INI section named like a credential
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";", "//")):
            continue
        if sections and (head := _SECTION.match(line)):
            section, stack = is_credential_key(head["name"].split(".")[-1].strip()), []
            continue
        indent = len(line) - len(line.lstrip())
        pair = _YAML_KEY.match(line)
        if pair is None:
            # a list item may sit at its key's own indent (``keys:`` then ``- abc``)
            while stack and stack[-1][0] > indent:
                stack.pop()
            item = _YAML_ITEM.match(line)
            if item is not None and (section or any(flag for _, flag in stack)) and (value := _literal(item["value"])):
                yield value
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = pair["key"].strip("\"'")
        counts = is_credential_key(key) or ((section or any(flag for _, flag in stack)) and not _describing(key))
        value = _literal(pair["value"] or "")
        if value and counts:
            yield value
        stack.append((indent + (len(pair["dash"]) if pair["dash"] else 0), counts))


def _literal(raw: str) -> str:
    """A YAML or INI scalar as written: quotes removed, a trailing comment dropped; empty
    for a block or flow start (``|``, ``>``, ``{``, ``[``) or a template."""
    raw = raw.strip()
    if not raw or raw[0] in "|>{[&*!":
        return ""
    if raw[0] in "\"'" and (end := raw.find(raw[0], 1)) > 0:
        raw = raw[1:end]
    else:
        raw = re.split(r"\s#", raw, maxsplit=1)[0].strip()
    return "" if _templated(raw) else raw[:MAX_VALUE_CHARS]


def _templated(value: str) -> bool:
    return "${" in value or "{{" in value or "%(" in value


def _netrc(text: str) -> set[str]:
    tokens = text.split()
    return {tokens[i + 1] for i, t in enumerate(tokens[:-1]) if t in ("password", "account")}


def _pgpass(text: str) -> set[str]:
    found = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        fields = re.split(r"(?<!\\):", line, maxsplit=4)
        if len(fields) == 5 and fields[4]:
            found.add(fields[4].replace("\\:", ":").replace("\\\\", "\\"))
    return found


# -- pairs in any text ------------------------------------------------------------------------

_HINTS = ("pass", "secret", "token", "key", "auth", "cred", "pwd", "cookie", "jwt")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_PAIR = re.compile(
    r"""(?P<name>[\w.-]+)["']?\]?[ \t]*[:=][ \t]*(?:(?:Bearer|Basic|Token|bearer|token)[ \t]+)?"""
    r"""(?:"(?P<double>(?:[^"\\\n]|\\.){1,512})"|'(?P<single>[^'\n]{1,512})'|(?P<bare>[^\s"'`,;&#{}\[\]()<>]{1,512}))"""
)
_IDENTIFIER_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_SEARCH_HIT = re.compile(r"(?P<path>[^\s:]+):(?:\d+:)?")


def credentials_in_text(text: str, *, strict: bool = True) -> set[str]:
    """The values of credential-named ``key: value`` pairs in ``text`` (see the module doc).
    ``strict``: the source is unknown, so a bare value that reads as code is not taken."""
    lower = text.lower()
    starts: set[int] = set()
    for hint in _HINTS:
        at = lower.find(hint)
        while at != -1 and len(starts) < MAX_HITS:
            start = at
            while start > 0 and text[start - 1] in _NAME_CHARS and at - start < 128:
                start -= 1
            starts.add(start)
            at = lower.find(hint, at + len(hint))
    found = set()
    for start in sorted(starts):
        pair = _PAIR.match(text, start)
        if pair is None or not is_credential_key(pair["name"]):
            continue
        value = _value(pair, text, strict=strict and not _from_config_file(text, start))
        if value:
            found.add(value)
    return found


def _from_config_file(text: str, at: int) -> bool:
    """Whether the line holding ``at`` is a search hit in a config file (``grep``'s
    ``path:line: text``): then a bare word is that file's value, not code."""
    line = text[text.rfind("\n", 0, at) + 1 : at]
    hit = _SEARCH_HIT.match(line)
    return hit is not None and config_format(hit["path"]) is not None


def _value(pair: re.Match[str], text: str, *, strict: bool) -> str:
    double, single, bare = pair["double"], pair["single"], pair["bare"]
    if double is not None or single is not None:
        value = double if double is not None else single
        return "" if _templated(value) else value
    if "${" in bare or bare.startswith("$") or _templated(bare):
        return ""
    if strict:
        following = text[pair.end() : pair.end() + 1]
        if following in ("(", "[", "{", ".") or (
            _IDENTIFIER_PATH.fullmatch(bare) and (not any(c.isdigit() for c in bare) or is_credential_key(bare))
        ):
            return ""
    return bare


# -- files a call names -----------------------------------------------------------------------

_PATH_TOKEN = re.compile(r"[^\s'\"`;|&<>(){}=,:*?]+")


def names_config_file(texts: Iterable[str]) -> bool:
    """Whether ``texts`` name a file of a known format, one ``named_config_files`` would
    look for (text only: no file is looked at)."""
    for text in texts:
        text = text[:MAX_CONFIG_BYTES]
        if "." not in text and not any(name in text for name in _UNDOTTED):
            continue  # no word of it can be such a name (see config_format)
        if any(config_format(token) is not None for token in _PATH_TOKEN.findall(text)):
            return True
    return False


def named_config_files(texts: Iterable[str], workdir: Path) -> list[Path]:
    """The existing files of a known format (``config_format``) that ``texts`` (a tool
    call's string arguments) name, relative to ``workdir`` or absolute; at most
    ``MAX_NAMED``."""
    found: dict[Path, None] = {}
    for text in texts:
        for token in _PATH_TOKEN.findall(text[:MAX_CONFIG_BYTES]):
            if config_format(token) is None:
                continue
            path = workdir / os.path.expanduser(token)
            try:
                if path.is_file():
                    found[path] = None
            except (OSError, ValueError):
                continue
            if len(found) >= MAX_NAMED:
                return list(found)
    return list(found)
