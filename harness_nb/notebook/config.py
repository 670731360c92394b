"""``HarnessNB``: the extension's settings as traitlets, so ``%config HarnessNB.model = …``
works and IPython config files can set them. Environment variables give some defaults.

Every setting of a harness is a trait made from its ``RunSettings`` field
(``settings.SETTINGS``): the same name, default, help and kind, and each value is checked
by the rule the setting keeps itself (``RunSettings.changed``), so a setting is stated once.
In ``%config`` an optional number's "none" is ``0`` and an empty list or mapping is empty.
Only the notebook's own settings (the workdir, how approval cards wait, how often views
redraw, the kernel tools) are written here.

A value a setting cannot take fails the cell that set it, and the old value stays in force:

- validators on the traits raise ``TraitError``; traitlets then rolls the whole update back
  and does not merge it into the settings' config;
- ``SettingsMagics`` replaces ``%config`` and turns that error into a ``UsageError`` (one
  line, no traceback). IPython's own ``%config`` (IPython 9, ``core/magics/config.py``)
  catches every exception raised while applying a value and only logs it, so with it the
  cell reports ok and the person believes the value was taken. Every line that does not
  set a ``HarnessNB`` setting still goes to IPython's magic.

Values from the environment (``$HARNESS_NB_*``) are checked when the settings are made,
because traitlets never validates defaults; a bad one stops ``%load_ext``.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, TraitType, Unicode, Union, default, validate
from traitlets.config import Config, Configurable

from ..core import ConfigError, SettingFix
from ..providers.factory import parse_model
from ..sandbox import Sandbox, machine_folder_problem
from ..settings import MODEL_VARIABLE, SETTINGS, RunSettings, Setting, default_model

# The settings whose default comes from the environment, and from which variable.
ENVIRONMENT = {
    "model": MODEL_VARIABLE,
    "workdir": "HARNESS_NB_WORKDIR",
    "approval_policy": "HARNESS_NB_APPROVAL_POLICY",
    "approval_timeout": "HARNESS_NB_APPROVAL_TIMEOUT",
    "unattended_approvals": "HARNESS_NB_UNATTENDED_APPROVALS",
    "background_approvals": "HARNESS_NB_BACKGROUND_APPROVALS",
    "record_to": "HARNESS_NB_RECORD_TO",
    "sandbox": "HARNESS_NB_SANDBOX",
}


def _env(setting: str, fallback: Any = None) -> Any:
    value = default_model() if setting == "model" else os.environ.get(ENVIRONMENT[setting])
    return value if value else fallback


# The ranges of the notebook's own number settings (the run settings keep theirs).
_NUMBER_RULES: dict[str, tuple[Callable[[float], bool], str]] = {
    "approval_timeout": (lambda n: n > 0, "more than 0 seconds"),
    "updates_per_second": (lambda n: n > 0, "more than 0"),
}


def config_line(fix: SettingFix) -> str:
    """How a notebook sets what an error's ``fix`` names: ``run %config
    HarnessNB.provider_options = {'streaming': False}`` (every run setting is a trait of the
    same name)."""
    return f"run %config HarnessNB.{fix.setting} = {fix.value!r}"


def _rejected(proposal: Any, problem: str) -> TraitError:
    return TraitError(f"HarnessNB.{proposal.trait.name} = {proposal.value!r} cannot be used: {problem}")


def notebook_default(setting: Setting) -> Any:
    """``setting``'s default as its trait holds it: ``0`` for an optional number's none,
    a list for names, a dict for a mapping."""
    if setting.kind in ("int", "float") and setting.default is None:
        return 0 if setting.kind == "int" else 0.0
    if setting.kind == "names":
        return list(setting.default or ())
    if setting.kind == "mapping":
        return dict(setting.default or {})
    return setting.default


class _SettingEnum(Enum):
    """An ``Enum`` that refuses a value with its setting's own words (a renamed value says
    what it is called now)."""

    def __init__(self, setting: Setting, **kwargs: Any) -> None:
        super().__init__(list(setting.choices), **kwargs)
        self.setting = setting

    def error(self, obj: Any, value: Any, error: Exception | None = None, info: str | None = None) -> Any:
        raise TraitError(f"HarnessNB.{self.name} = {value!r} cannot be used: {self.setting.not_a_choice(value)}")


def _trait(setting: Setting) -> TraitType[Any, Any]:
    """The ``%config`` trait of a run setting (see the module doc)."""
    value = notebook_default(setting)
    value = _env(setting.name, value) if setting.name in ENVIRONMENT else value
    made: dict[str, Callable[[], TraitType[Any, Any]]] = {
        "bool": lambda: Bool(value),
        "int": lambda: Int(value),
        "float": lambda: Float(value),
        "text": lambda: Unicode(value, allow_none=True),
        "names": lambda: List(Unicode(), default_value=value),
        "mapping": lambda: Dict(default_value=value),
        "choice": lambda: _SettingEnum(setting, default_value=value),
        "pace": lambda: Union([Unicode(), Float()], default_value=value, allow_none=True),
    }
    trait = made[setting.kind]()
    trait.help = setting.help
    return trait.tag(config=True)


def _as_setting(value: Any) -> Any:
    """A trait's value as the setting takes it (a list as a tuple)."""
    return tuple(value) if isinstance(value, list) else value


class HarnessNB(Configurable):
    """Settings of the harness_nb notebook extension: every run setting (see the module
    doc), and the notebook's own below."""

    # the run settings' traits, made from their fields (a class body's namespace is a dict)
    locals().update({name: _trait(setting) for name, setting in SETTINGS.items()})

    workdir = Unicode(
        _env("workdir", "."),
        help="Working directory the agent's file tools are confined to and its commands may change: an "
        "existing project folder (a relative one starts at the kernel's working directory), never /, a folder "
        "of the machine or a home itself.",
    ).tag(config=True)
    # The static default is the real one: traitlets skips the check of a value equal to it
    # while the environment's default was never read (0.0 was accepted that way).
    approval_timeout = Float(
        300.0,
        help="Seconds an approval card waits for a click before the call is denied, and a question card for an "
        "answer before the agent goes on without one (default 300).",
    ).tag(config=True)
    unattended_approvals = Enum(
        ["deny", "approve"],
        default_value=_env("unattended_approvals", "deny"),
        help="Decision for approvals when the frontend cannot answer (nbclient, nbval, papermill: "
        "they send allow_stdin=false).",
    ).tag(config=True)
    updates_per_second = Float(8.0, help="Most widget refreshes per second per run view.").tag(config=True)
    kernel_tools = Bool(
        True,
        help="Give the main agent list_variables, inspect_variable, run_python, notebook_history and propose_cell "
        "(and, in a page with the frontend extension, notebook_read, notebook_edit, notebook_insert and notebook_run "
        "in place of the last two).",
    ).tag(config=True)

    tool_names: Callable[[], list[str]] | None = None
    """The names ``tools`` may hold (set by the extension, which knows the harness's tools);
    without it, names are checked when the harness is built."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name, variable in ENVIRONMENT.items():
            if not _env(name):
                continue
            try:
                value = getattr(self, name)  # checks the type only
                if value == self.trait_defaults(name):  # not replaced by a config file
                    setattr(self, name, value)  # checks the rest: a default is never validated
            except TraitError as exc:
                raise TraitError(f"{str(exc).rstrip('.')} (from ${variable})") from None

    def run_settings(self, **overrides: Any) -> RunSettings:
        """What these settings make of a run's settings, with ``overrides`` by name (``None``:
        the default; ``tools=None``: every tool). Each value was checked when it was set."""
        values = {name: _as_setting(getattr(self, name)) for name in SETTINGS}
        return RunSettings().changed(**{**values, **overrides})

    @default("approval_timeout")
    def _approval_timeout_from_environment(self) -> Any:
        value = _env("approval_timeout")
        try:
            return float(value) if value else 300.0
        except ValueError:
            return value  # as given, so the setting refuses it (never a silent 300)

    @validate(*SETTINGS)
    def _check_setting(self, proposal: Any) -> Any:
        # the setting's own rule, then what only the notebook can say at once
        name = proposal.trait.name
        try:
            RunSettings().changed(**{name: _as_setting(proposal.value)})
            if name == "model" and proposal.value:
                # the form only: scripted/ and replay/ files are read when a run starts
                parse_model(proposal.value)
            if name == "sandbox" and proposal.value == "bwrap":
                Sandbox.create("bwrap")  # refused here, in the cell that asks, when it cannot work
        except ConfigError as exc:
            raise _rejected(proposal, str(exc)) from None
        if name == "tools":
            self._check_tools(proposal)
        return proposal.value

    def _check_tools(self, proposal: Any) -> None:
        names: list[str] = list(proposal.value)
        if self.tool_names is not None and names:
            known = self.tool_names()
            unknown = [n for n in names if n not in known]
            if unknown:
                close = difflib.get_close_matches(unknown[0], known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise _rejected(proposal, f"no tool named {unknown[0]!r}{hint}; the tools are: {', '.join(known)}")

    @validate("workdir")
    def _check_workdir(self, proposal: Any) -> str:
        # Checked when set, so the cell that names a missing folder is the one that fails;
        # the harness checks again when it is built (the folder may be gone by then).
        folder = Path.cwd() / Path(proposal.value or ".").expanduser()
        if not folder.is_dir():
            raise _rejected(proposal, f"{folder} is not a folder; create it first or name another")
        refused = machine_folder_problem(folder)
        if refused is not None:
            raise _rejected(proposal, refused)
        value: str = proposal.value
        return value

    @validate(*_NUMBER_RULES)
    def _check_number(self, proposal: Any) -> float:
        allowed, valid = _NUMBER_RULES[proposal.trait.name]
        if not allowed(proposal.value):
            raise _rejected(proposal, f"it must be {valid}")
        value: float = proposal.value
        return value


# `%config HarnessNB.x` reads a setting; any longer line is a statement that sets it:
# `HarnessNB.x = …`, `HarnessNB.x.update({…})` (IPython's magic wants an "=" in it too).
_SETTING = re.compile(r"\s*HarnessNB\.(\w+)\b")
_READ = re.compile(r"^\w+\.\w+$")


@magics_class
class SettingsMagics(Magics):
    """``%config`` that fails its cell when a ``HarnessNB`` value is refused (see the module
    doc for why IPython's does not); everything else goes to IPython's ``%config``."""

    def __init__(self, shell: Any, settings: HarnessNB, ipython_config: Callable[[str], Any]) -> None:
        super().__init__(shell)
        self.settings = settings
        self.ipython_config = ipython_config

    # A method named ``config`` would hide the ``config`` trait every Magics has. (IPython
    # annotates ``line_magic`` as returning a union, so mypy cannot see it is a decorator here.)
    @line_magic("config")  # type: ignore[arg-type]
    def config_line(self, line: str) -> Any:
        """Configure IPython and harness_nb: ``%config HarnessNB`` lists the settings,
        ``%config HarnessNB.model`` shows one, ``%config HarnessNB.model = 'openai/gpt-4o-mini'``
        sets one (the value is a Python expression). A value harness_nb cannot use fails
        the cell and the old value stays. Other classes: as IPython's ``%config``."""
        found = _SETTING.match(line)
        if found is None:
            return self.ipython_config(line)
        name = found.group(1)
        settings = self.settings.trait_names(config=True)
        if name not in settings:
            close = difflib.get_close_matches(name, settings, n=1)
            hint = f"did you mean HarnessNB.{close[0]}? " if close else ""
            raise UsageError(f"HarnessNB has no setting {name!r}; {hint}see %config HarnessNB for the list")
        if _READ.match(line.strip()):
            return self.ipython_config(line)
        assert self.shell is not None  # registered magics always have one
        cfg = Config()
        try:
            # as IPython's magic does: the value may name the notebook's variables
            exec("cfg." + line.strip(), self.shell.user_ns, {"cfg": cfg})
        except (NameError, SyntaxError) as exc:
            raise UsageError(
                f"%config {line.strip()}: {exc}. The value is Python: quote text, e.g. "
                f"%config HarnessNB.model = 'openai/gpt-4o-mini'"
            ) from None
        try:
            self.settings.update_config(cfg)
        except TraitError as exc:
            kept = getattr(self.settings, name)
            raise UsageError(f"{str(exc).rstrip('.')}. HarnessNB.{name} stays {kept!r}") from None
