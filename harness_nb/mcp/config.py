"""Where MCP servers are configured, and what a configuration may say.

The format is Claude Code's ``.mcp.json``::

    {"mcpServers": {
        "files":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                   "env": {"DEBUG": "0"}, "cwd": "tools"},
        "github": {"type": "http", "url": "https://api.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}}}

A server is ``stdio`` (``command``, optional ``args``, ``env``, ``cwd``; ``"type": "stdio"``
or no type) or streamable HTTP (``"type": "http"`` or ``"streamable-http"``, ``url``,
optional ``headers``). ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``,
``cwd``, ``url`` and ``headers`` are replaced from the environment, as Claude Code does; a
variable that is not set and has no default makes that server unusable (its entry's error
says which variable).

Sources, lowest precedence first (a later server of the same name replaces an earlier one):
the user's ``~/.harness_nb/mcp.json``, the project's ``<workdir>/.mcp.json``, then the
servers given in code (``Harness(mcp_servers=…)``, ``%config HarnessNB.mcp_servers``).

The files are untrusted input (a cloned repository brings its own): read bounded in size,
and each bad entry costs one ``ConfigError`` naming the file, the server and the field with
the fix — kept as a warning, while the other servers are used. Servers given in code are
checked the same way, but a bad one is raised: the person who wrote it is right there.
Every value of ``env`` and ``headers`` joins the process's secrets (``core.secret``), so it
never reaches a model, a transcript, a log or an output.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias
from urllib.parse import urlsplit

from ..core import ConfigError, read_regular
from ..core.secret import SECRETS, could_be_secret

PROJECT_FILE = ".mcp.json"
MAX_FILE_BYTES = 256 * 1024
MAX_SERVERS = 64
MAX_TEXT = 8 * 1024
MAX_ITEMS = 256
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$")
SERVER_NAME_RULE = "letters, digits, '-' and '_' (at most 48, no '__'), e.g. github"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_STDIO_FIELDS = frozenset({"type", "command", "args", "env", "cwd"})
_HTTP_FIELDS = frozenset({"type", "url", "headers"})
HTTP_TYPES = ("http", "streamable-http")

log = logging.getLogger("harness_nb.mcp")


@dataclass(frozen=True)
class StdioServer:
    """A server the harness runs as a child process, speaking MCP over its stdin/stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def describe(self) -> str:
        """``command arg …``, shell-quoted (for ``%mcp``; shown scrubbed)."""
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True)
class HttpServer:
    """A server the harness reaches over streamable HTTP at ``url``."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """The URL (for ``%mcp``)."""
        return self.url


ServerConfig: TypeAlias = StdioServer | HttpServer


@dataclass(frozen=True)
class ServerEntry:
    """One configured server: its name, how to reach it, where it was configured
    (``~/.harness_nb/mcp.json``, ``.mcp.json``, ``settings``, an agent's name), and whether
    the project configured it (``.mcp.json``, an agent file in the workdir): such a server
    starts only once the person trusts it (``trust.py``)."""

    name: str
    config: ServerConfig
    source: str
    project: bool = False


@dataclass
class Servers:
    """What the sources configure: the servers by name, and one warning per bad entry or
    file (each a ``ConfigError``'s message)."""

    entries: dict[str, ServerEntry] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def expand(text: str, where: str, environ: Mapping[str, str]) -> str:
    """``text`` with ``${VAR}`` and ``${VAR:-default}`` replaced from ``environ``. A variable
    that is not set (or, with ``:-``, empty) and has no default is a ``ConfigError``."""

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found:
            return found
        if found is not None and default is None:
            return found  # set but empty, no default: empty, as the shell would
        if default is not None:
            return default
        raise ConfigError(f"{where}: ${{{name}}} is not set; export {name}, or write ${{{name}:-default}}")

    return _VARIABLE.sub(value, text)


def parse_server(
    name: Any, raw: Any, source: str, *, workdir: Path, environ: Mapping[str, str] | None = None, project: bool = False
) -> ServerEntry:
    """One entry of ``mcpServers``, checked and expanded; a ``ConfigError`` naming the source,
    the server and the field (and how to fix it) when it cannot be used. ``project``: the
    project configured it (see ``ServerEntry``)."""
    env = os.environ if environ is None else environ
    if not isinstance(name, str) or not SERVER_NAME.match(name) or "__" in name:
        raise ConfigError(f"{source}: MCP server name {str(name)[:60]!r} must be {SERVER_NAME_RULE}")
    where = f"{source}: MCP server {name!r}"
    if not isinstance(raw, Mapping):
        raise ConfigError(f'{where} must be an object, e.g. {{"command": "my-server", "args": []}}')
    kind = raw.get("type", "stdio" if "url" not in raw else "http")
    if kind == "stdio":
        return ServerEntry(name, _stdio(raw, where, workdir, env), source, project)
    if kind in HTTP_TYPES:
        return ServerEntry(name, _http(raw, where, env), source, project)
    if kind == "sse":
        raise ConfigError(f'{where}: "type": "sse" (the old HTTP+SSE transport) is not supported; use "http"')
    raise ConfigError(f'{where}: "type" must be "stdio", "http" or "streamable-http", not {str(kind)[:40]!r}')


def _unknown(raw: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    extra = sorted(str(k) for k in raw if k not in known)
    if extra:
        raise ConfigError(f"{where}: unknown field {extra[0][:40]!r}; the fields are {', '.join(sorted(known))}")


def _text(value: Any, where: str, env: Mapping[str, str], *, example: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where} must be a string, e.g. {example}")
    text = str(value)
    if len(text) > MAX_TEXT or "\x00" in text:
        raise ConfigError(f"{where} is longer than {MAX_TEXT} characters or holds a NUL; shorten it")
    return expand(text, where, env)


def _mapping(value: Any, where: str, env: Mapping[str, str], *, example: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > MAX_ITEMS:
        raise ConfigError(f"{where} must be an object of at most {MAX_ITEMS} strings, e.g. {example}")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or len(key) > 256:
            raise ConfigError(f"{where}: key {str(key)[:40]!r} must be a non-empty string")
        out[key] = _text(item, f"{where}.{key}", env, example=f'"{key}": "value"')
    return out


def _stdio(raw: Mapping[str, Any], where: str, workdir: Path, env: Mapping[str, str]) -> StdioServer:
    _unknown(raw, _STDIO_FIELDS, where)
    if not raw.get("command"):
        raise ConfigError(f'{where}: "command" is missing; name the program that runs the server, e.g. "npx"')
    command = _text(raw["command"], f"{where}: command", env, example='"npx"')
    args = raw.get("args") or []
    if not isinstance(args, list) or len(args) > MAX_ITEMS:
        raise ConfigError(f'{where}: "args" must be a list of at most {MAX_ITEMS} strings, e.g. ["-y", "my-server"]')
    expanded = tuple(_text(a, f"{where}: args[{i}]", env, example='"--flag"') for i, a in enumerate(args))
    variables = _mapping(raw.get("env"), f"{where}: env", env, example='{"API_KEY": "${API_KEY}"}')
    cwd = None
    if raw.get("cwd") is not None:
        folder = Path(_text(raw["cwd"], f"{where}: cwd", env, example='"tools"')).expanduser()
        cwd = folder if folder.is_absolute() else workdir / folder
    _learn_secrets(variables.values())
    return StdioServer(command, expanded, variables, cwd)


def _http(raw: Mapping[str, Any], where: str, env: Mapping[str, str]) -> HttpServer:
    _unknown(raw, _HTTP_FIELDS, where)
    if not raw.get("url"):
        raise ConfigError(f'{where}: "url" is missing; give the server\'s address, e.g. "http://127.0.0.1:8000/mcp"')
    url = _text(raw["url"], f"{where}: url", env, example='"http://127.0.0.1:8000/mcp"')
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f'{where}: url {url[:80]!r} must be an http:// or https:// address with a host')
    headers = _mapping(raw.get("headers"), f"{where}: headers", env, example='{"Authorization": "Bearer ${TOKEN}"}')
    _learn_secrets(headers.values())
    if parts.password:
        SECRETS.add(parts.password)
    return HttpServer(url, headers)


def _learn_secrets(values: Any) -> None:
    """Every ``env`` / ``headers`` value that could be a credential (and the token of an
    ``Authorization: Bearer …``) is masked from now on."""
    for value in values:
        if could_be_secret(value):
            SECRETS.add(value, value.split()[-1])


def parse_servers(
    raw: Any,
    source: str,
    *,
    workdir: Path,
    environ: Mapping[str, str] | None = None,
    strict: bool = False,
    project: bool = False,
) -> Servers:
    """The servers of one source: a ``.mcp.json`` document (``{"mcpServers": {…}}``) or the
    ``name → config`` mapping itself. With ``strict`` (servers given in code) a bad entry is
    raised, else it becomes a warning and the rest are kept. ``project``: see ``ServerEntry``."""
    found = Servers()
    if isinstance(raw, Mapping) and "mcpServers" in raw:
        raw = raw["mcpServers"]
    if not isinstance(raw, Mapping):
        problem = f'{source}: "mcpServers" must be an object of servers by name'
        if strict:
            raise ConfigError(problem)
        found.warnings.append(problem)
        return found
    if len(raw) > MAX_SERVERS:
        problem = f"{source}: more than {MAX_SERVERS} MCP servers; only the first {MAX_SERVERS} are read"
        if strict:
            raise ConfigError(problem)
        found.warnings.append(problem)
    for name, config in list(raw.items())[:MAX_SERVERS]:
        try:
            found.entries[name] = parse_server(name, config, source, workdir=workdir, environ=environ, project=project)
        except ConfigError as exc:
            if strict:
                raise
            found.warnings.append(f"{exc}; this server is not used")
    return found


def read_file(path: Path, shown: str, *, workdir: Path, project: bool = False) -> Servers:
    """The servers of the ``.mcp.json``-format file ``path`` (``shown`` names it in messages);
    a missing file configures none, an unreadable one costs one warning."""
    try:
        data = read_regular(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return Servers()
    except OSError as exc:
        reason = exc.strerror or (exc.args[0] if exc.args else type(exc).__name__)
        return Servers(warnings=[f"{shown}: cannot read it ({reason}); its MCP servers are not used"])
    if len(data) > MAX_FILE_BYTES:
        return Servers(warnings=[f"{shown}: larger than {MAX_FILE_BYTES // 1024} KiB; its MCP servers are not used"])
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return Servers(warnings=[f"{shown}: not UTF-8 text; its MCP servers are not used"])
    except json.JSONDecodeError as exc:
        return Servers(warnings=[f"{shown}: not valid JSON ({exc.msg} at line {exc.lineno}); its MCP servers are not used"])
    except (RecursionError, ValueError) as exc:
        return Servers(warnings=[f"{shown}: cannot be read as JSON ({type(exc).__name__}); its MCP servers are not used"])
    if not isinstance(document, dict) or not isinstance(document.get("mcpServers", {}), dict):
        return Servers(warnings=[f'{shown}: not an object with "mcpServers"; its MCP servers are not used'])
    return parse_servers(document.get("mcpServers", {}), shown, workdir=workdir, project=project)


def configured_servers(workdir: Path, *, home: Path | None, given: Mapping[str, Any] | None = None) -> Servers:
    """Every server of the three sources (see the module doc), later sources winning."""
    result = Servers()
    sources: list[Servers] = []
    if home is not None:
        sources.append(read_file(home / ".harness_nb" / "mcp.json", "~/.harness_nb/mcp.json", workdir=workdir))
    sources.append(read_file(workdir / PROJECT_FILE, PROJECT_FILE, workdir=workdir, project=True))
    if given:
        sources.append(parse_servers(given, "settings", workdir=workdir, strict=True))
    for servers in sources:
        for name, entry in servers.entries.items():
            if name in result.entries:
                log.info("MCP server %r of %s replaces the one of %s", name, entry.source, result.entries[name].source)
            result.entries[name] = entry
        result.warnings += servers.warnings
    return result


def check_servers(given: Mapping[str, Any], *, workdir: Path | None = None) -> None:
    """Raise the ``ConfigError`` of the first bad server in ``given`` (a ``name → config``
    mapping or a ``.mcp.json`` document); for settings that take one."""
    parse_servers(given, "settings", workdir=workdir or Path.cwd(), strict=True)
