"""``PermissionHook``: whether a tool call runs, asks or is refused — the person's rules
first, then the approval policy.

For every call, in this order:

1. **Deny rules** (any source) refuse it, naming the rule and where it came from.
2. **Ask rules** (``permissions.ask`` in a settings file) ask.
3. **Protected paths** — a write to a path only the person may change
   (``sandbox.protection``: agent, skill and settings folders and any other agent folder
   the harness names, ``.mcp.json``, git's config and hooks, files that run code at the next
   start, other agents' instructions, ``.env`` files), or by a file tool to a module that
   would shadow one the kernel imports (``mcp.py`` in the notebook's folder:
   ``core.shadowed_module``) or to ``.ssh`` / key files — by a file tool or by an
   unsandboxed shell command that says so — asks, whatever the policy says except
   ``never``. A file tool's path is judged as ``tools.write_target`` gives it, the path the
   tool writes without following symlinks. Only an allow rule the person gave directly
   (``Approve for this session``, ``Harness(allow=…)``, ``%config HarnessNB.allow``) lets it
   run: a rule read from a settings file cannot, because those files sit in the workdir,
   where the agent writes and where a cloned repository brings its own. A file must not
   grant the right to write the files that grant rights.
4. **Allow rules** let it run.
5. **The policy**:

   - ``"allowlist"`` (the default):
     read-only and coordination tools run (a subagent's own calls pass this hook too);
     ``write_file`` / ``edit_file`` run (the tools keep them inside the workdir);
     ``run_python`` and ``notebook_run`` always ask; ``bash`` runs when its command is known to be read-only —
     or, when bash runs in the sandbox (``sandboxed()``), unless it destroys data in the
     workdir — and otherwise asks with the reasons ``shell/policy.py`` names; any other
     tool that is not read-only asks. Whether bash is sandboxed is the tool's own word
     (``Tool.sandboxed``: ``bash`` bound to an active bubblewrap ``Sandbox``).
   - ``"always"``: every tool that is not read-only asks.
   - ``"never"``: nothing asks (deny rules still refuse).

A tool that asks through a card of its own (``Tool.asks_itself``: ``notebook_edit``, whose
card is the diff in the cell; ``notebook_run``, whose approval card shows the source it
read) is judged like any other: an ``Ask`` makes it show its card, an ``Allow`` (an allow
rule, ``"never"``, ``acceptEdits`` for an edit) makes it act unasked.

**Permission modes** (Claude Code's ``permissionMode``, for a subagent: ``for_subagent``)
change steps 3-5 for one agent, never step 1 — a mode cannot widen what the person's deny
rules forbid, nor their ask rules:

- ``"default"``: the policy as it is.
- ``"acceptEdits"``: the edits (``EDITS``: ``write_file`` / ``edit_file``, and
  ``notebook_edit``, applied without its card — as Claude Code's covers Edit, Write and
  NotebookEdit) run without asking, also under ``"always"`` (the file tools keep them
  inside the workdir; agent and settings files still ask). Running code — ``run_python``,
  ``notebook_run``, ``bash`` — is no edit: it asks as before.
- ``"plan"``: read only. Every call that is not read-only is denied with a reason, bash
  runs only commands known to be read-only; writes inside ``writable`` (the agent's
  memory folder) are the one exception.
- ``"dontAsk"``: whatever would ask is denied instead.
- ``"bypassPermissions"``: the policy asks nothing (``"never"``); agent, skill and settings
  files and ask rules still ask. Whether an agent may have it is the caller's decision
  (``subagents.narrowing.effective_mode``: only when the person enabled it).
- ``"auto"`` (Claude Code's classifier) is not supported here and acts as ``"default"``.

``writable`` folders (an agent's memory) are written without the agent-file ask, and may
lie outside the workdir; ``writes_only_in`` confines every file-tool write to such folders
(for file tools an agent holds only because of its memory).

The policies and modes are named in ``mode.py``; ``remember.py`` keeps the rules of
"Approve for this session".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..core import ToolCall, ToolError, run_blocking
from ..core.imports import shadowed_module
from ..engine.hook import ALLOW, Allow, Ask, Decision, Deny, Hook
from ..sandbox import protection
from ..sandbox.protected import places_around
from ..tools import ToolContext, ToolOutcome, write_target
from ..tools.path import display_path
from .mode import PERMISSION_MODES, POLICIES, PermissionMode, Policy
from .rule import PATH_TOOLS, PermissionRules, RuleSet, Sourced, first_match
from .shell.parser import Script, parse_command
from .shell.policy import PROTECTED, Place, Reason, assess, command_texts, each_command, protected_write

SENSITIVE = Reason("writes a sensitive file")
FILE_TOOLS = frozenset({"write_file", "edit_file"})
EDITS = FILE_TOOLS | {"notebook_edit"}  # what acceptEdits runs unasked
PLAN_ONLY_READS = "this agent may only read (permissionMode: plan)"
_NAMED_PATHS = 8  # protected paths a card names; an approval covers every one of them all the same


class PermissionHook(Hook):
    """The permission hook (see the module doc). ``rules`` are the harness's rules;
    ``sandboxed`` tells whether bash runs in the sandbox (``None``: ask the tool, its
    ``Tool.sandboxed``); ``protected`` adds agent folders to the paths of
    ``sandbox.protection`` (the sandbox keeps them read-only too); ``always_ask`` names tools
    that always ask; ``mode``, ``writable`` and ``writes_only_in`` are a subagent's (see
    the module doc and ``for_subagent``)."""

    def __init__(
        self,
        policy: Policy = "allowlist",
        *,
        rules: PermissionRules | None = None,
        sandboxed: Callable[[], bool] | None = None,
        protected: Iterable[Path] = (),
        always_ask: Iterable[str] = ("run_python", "notebook_run"),
        home: Path | None = None,
        written: dict[Path, bool] | None = None,
        mode: PermissionMode = "default",
        writable: Iterable[Path] = (),
        writes_only_in: Iterable[Path] | None = None,
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"approval policy must be one of {', '.join(POLICIES)}, not {policy!r}")
        self.policy: Policy = policy
        self.rules = rules
        self.sandboxed = sandboxed
        self.protected = tuple(protected)
        self.always_ask = frozenset(always_ask)
        self.home = home or Path.home()
        # files the agent wrote with the file tools this session: resolved path -> created
        self.written: dict[Path, bool] = {} if written is None else written
        self._existed: dict[str, tuple[Path, bool]] = {}
        if mode not in PERMISSION_MODES:
            raise ValueError(f"permission mode must be one of {', '.join(PERMISSION_MODES)}, not {mode!r}")
        self.mode: PermissionMode = mode
        self.writable = tuple(_real(p) for p in writable)
        self.writes_only_in = None if writes_only_in is None else tuple(_real(p) for p in writes_only_in)

    def with_policy(self, policy: Policy) -> PermissionHook:
        """The same hook under another policy (same rules, sandbox and session files)."""
        return self._copy(policy=policy)

    def for_subagent(
        self,
        mode: PermissionMode = "default",
        *,
        writable: Iterable[Path] = (),
        writes_only_in: Iterable[Path] | None = None,
    ) -> PermissionHook:
        """This hook for a subagent in permission ``mode`` that may write ``writable``
        folders (its memory) — same policy, rules, sandbox and session files."""
        return self._copy(mode=mode, writable=writable, writes_only_in=writes_only_in)

    def _copy(self, **changes: object) -> PermissionHook:
        settings: dict[str, object] = {
            "policy": self.policy,
            "rules": self.rules,
            "sandboxed": self.sandboxed,
            "protected": self.protected,
            "always_ask": self.always_ask,
            "home": self.home,
            "written": self.written,
            "mode": self.mode,
            "writable": self.writable,
            "writes_only_in": self.writes_only_in,
        }
        settings.update(changes)
        policy = settings.pop("policy")
        return PermissionHook(policy, **settings)  # type: ignore[arg-type]

    def place(self, workdir: Path, *, sandboxed: bool) -> Place:
        return Place(workdir.resolve(), protected=self.protected, written=self.written, sandboxed=sandboxed, home=self.home)

    # ------------------------------------------------------------------ the decision
    async def before_tool(self, call: ToolCall, ctx: ToolContext) -> Decision:
        """``decide`` on harness_nb's worker threads: it reads settings files and looks at
        the file system (bounded, but not for the kernel's event loop) — or here, when the
        settings files cannot have changed (``PermissionRules.unchanged``) and the call has
        no path to look at (``_needs_no_files``): most read-only calls."""
        rules = self.rules.unchanged() if self.rules is not None else RuleSet()
        if rules is not None and _needs_no_files(call, ctx, rules):
            return self.decide(call, ctx, rules=rules)
        try:
            return await run_blocking(self.decide, call, ctx)
        except ToolError as exc:  # every worker stuck: ask rather than guess
            return Ask(f"cannot check the call now ({exc})", "high")

    def decide(self, call: ToolCall, ctx: ToolContext, *, rules: RuleSet | None = None) -> Decision:
        """Allow, Deny or Ask for ``call`` (see the module doc for the order), by ``rules``
        (``None``: those in force now, the settings files re-stated)."""
        decision = self._decide(call, ctx, rules)
        if self.mode == "dontAsk" and isinstance(decision, Ask):
            return Deny(f"would ask ({decision.reason}), and this agent never asks (permissionMode: dontAsk)")
        return decision

    def _decide(self, call: ToolCall, ctx: ToolContext, rules: RuleSet | None) -> Decision:
        try:
            args = call.parsed_arguments()
        except ValueError:
            args = {}  # the tool boundary reports them; name-only rules still apply
        if rules is None:
            rules = self.rules.current() if self.rules is not None else RuleSet()
        workdir = ctx.workdir
        if call.name == "bash" and isinstance(args.get("command"), str):
            return self._bash(call, args["command"], rules, ctx)
        denied = first_match(rules.deny, call, args, workdir=workdir, home=self.home, unsure=True)
        if denied is not None:
            return Deny(_by(denied, "denied"))
        refused = self._mode_refusal(call, args, ctx)
        if refused is not None:
            return Deny(refused)
        path = args.get("path")
        written = _written(workdir, path) if call.name in FILE_TOOLS else None
        # what the card names: the path the tool writes (an approval covers that one only)
        target = frozenset({written}) if written is not None else frozenset()
        asked = first_match(rules.ask, call, args, workdir=workdir, home=self.home, unsure=True)
        if asked is not None:
            return Ask(_by(asked, "asks"), "medium", target)
        allowed = first_match(rules.allow, call, args, workdir=workdir, home=self.home)
        if written is not None:  # for after_tool: a file it creates?
            self._existed[call.id] = (written, not written.exists())
        special = self._file_reason(call, args, ctx)
        if special is not None and self.policy != "never" and not (allowed and allowed.trusted):
            if allowed is None:
                return Ask(special.text, special.risk, target)
            return Ask(f"{special.text} (a rule from {allowed.origin} cannot allow that)", special.risk, target)
        # Past that check, a protected write runs only by a rule the person gave or their
        # policy "never": the person vouched for it, so the checkpoints keep it; so they do
        # a subagent's writes into its own memory folder.
        in_writable = call.name in FILE_TOOLS and isinstance(path, str) and self._in_writable(workdir, path)
        vouched = _written(workdir, path, roots=self.writable) if special is not None or in_writable else None
        decision = ALLOW if allowed is not None else self._policy(call, ctx)
        if isinstance(decision, Ask):
            return Ask(decision.reason, decision.risk, target)
        return Allow(vouched=frozenset({vouched})) if vouched is not None else decision

    def _mode_refusal(self, call: ToolCall, args: dict[str, object], ctx: ToolContext) -> str | None:
        """Why this agent's mode or memory-only file tools refuse ``call`` (not bash)."""
        tool = ctx.tool
        path = args.get("path")
        in_writable = call.name in FILE_TOOLS and isinstance(path, str) and self._in_writable(ctx.workdir, path)
        if self.mode == "plan" and not in_writable:
            if tool is None or not (tool.read_only or tool.coordination):
                return f"{call.name} changes files or state; {PLAN_ONLY_READS}"
        if self.writes_only_in is not None and call.name in FILE_TOOLS and not in_writable:
            folders = ", ".join(map(str, self.writes_only_in)) or "(none)"
            return f"{call.name}: this agent may write only in its memory folder ({folders})"
        return None

    def _in_writable(self, workdir: Path, path: str) -> bool:
        target = _written(workdir, path, roots=self.writable)
        return target is not None and any(target.is_relative_to(folder) for folder in self.writable)

    def _file_reason(self, call: ToolCall, args: dict[str, object], ctx: ToolContext) -> Reason | None:
        """Why a write by a file tool (any tool that is not read-only and names a
        ``path``) always asks, if it does: the path as the tool will write it (no symlink
        followed) is protected, or would shadow a module the kernel imports."""
        path = args.get("path")
        if not isinstance(path, str) or (ctx.tool is not None and ctx.tool.read_only):
            return None
        if call.name in FILE_TOOLS and self._in_writable(ctx.workdir, path):
            return None  # the agent's own memory folder
        try:
            target = write_target(ctx.workdir, path)
        except ToolError:
            return None  # outside the workdir, or no path at all: the tools refuse it themselves
        places = places_around(target.base, target.rel, home=self.home)
        found = protection(target.rel, folders=self._folders_inside(target.base), places=places)
        if found is not None:
            return protected_write(found)
        if any(target.path.is_relative_to(p.resolve()) for p in self.protected):
            return PROTECTED
        module = shadowed_module(target.path, workdir=target.base) if target.parts else None
        if module is not None:
            return Reason(f"writes {target.rel}, which would run in place of the module {module} when it is imported")
        name = target.parts[-1] if target.parts else ""
        if name.startswith(("id_rsa", "id_ed25519", ".netrc")) or ".ssh" in target.parts:
            return SENSITIVE
        return None

    def _folders_inside(self, root: Path) -> list[str]:
        """The extra agent folders (``protected``) that lie in ``root``, relative to it."""
        return [p.relative_to(root).as_posix() for p in map(_real, self.protected) if p.is_relative_to(root)]

    def _bash(self, call: ToolCall, command: str, rules: RuleSet, ctx: ToolContext) -> Decision:
        script = parse_command(command)
        texts = [command, *command_texts(script)]
        denied = _bash_match(rules.deny, texts)
        if denied is not None:
            return Deny(_by(denied, "denied"))
        sandboxed = self.sandboxed() if self.sandboxed is not None else bool(ctx.tool and ctx.tool.sandboxed)
        place = self.place(ctx.workdir, sandboxed=sandboxed)
        if self.mode == "plan" and assess(command, place).asks(sandboxed=False):
            return Deny(f"not a command known to be read-only; {PLAN_ONLY_READS}")
        assessment = assess(command, place)
        # in the sandbox these folders are read-only mounts: the write fails, nothing to ask
        planted = [] if sandboxed else [r for r in assessment.reasons if r.protects]
        # what the card names, and so what an approval or a rule covers: the protected paths
        # the command's text shows it writes (one it hides is reverted after it, whoever approved)
        named = frozenset(assessment.protected) if planted else frozenset()
        asked = _bash_match(rules.ask, texts)
        if asked is not None:
            return _naming(Ask(_by(asked, "asks"), "medium"), named, ctx.workdir)
        if any(s.rule.covers("bash") for s in (*rules.deny, *rules.ask)) and _hides_commands(script):
            reason = "a command whose program is computed cannot be checked against the deny rules"
            return _naming(Ask(reason, "medium"), named, ctx.workdir)
        allowed = self._bash_allowed(command, script, rules.allow, place)
        if planted and self.policy != "never" and not (allowed and allowed.trusted):
            return _ask(planted, named, ctx.workdir)
        if allowed is not None:  # as for the file tools: the person's rule or "never" vouched for it
            return Allow(vouched=named)
        if self.policy != "allowlist" or self.mode == "bypassPermissions":
            decision = self._policy(call, ctx)
            if isinstance(decision, Ask):
                return _naming(decision, named, ctx.workdir)
            return Allow(vouched=named) if isinstance(decision, Allow) else decision
        asks = assessment.asks(sandboxed=sandboxed)
        return _ask(asks, named, ctx.workdir) if asks else ALLOW

    def _bash_allowed(self, command: str, script: Script, allow: Iterable[Sourced], place: Place) -> Sourced | None:
        """The allow rule that lets ``command`` run: one for every bash command or for this
        exact text; or, for a plain command, each simple command matched by a rule or
        read-only by itself (its redirections too)."""
        rules = [s for s in allow if s.rule.covers("bash")]
        for s in rules:
            spec = s.rule.spec
            if spec is None or spec.strip() == "*" or (
                (s.rule.exact or "*" not in spec) and " ".join(spec.split()) == " ".join(command.split())
            ):
                return s
        if not script.plain or not rules:
            return None
        used: Sourced | None = None
        for cmd, read_only, redirects_ok in each_command(script, place):
            rule = next((s for s in rules if s.rule.matches_text(cmd.text())), None)
            if rule is not None and redirects_ok:
                used = used or rule
            elif not read_only:
                return None
        return used

    def _policy(self, call: ToolCall, ctx: ToolContext) -> Decision:
        tool = ctx.tool
        read_only = tool is not None and tool.read_only
        if self.policy == "never" or read_only or self.mode == "bypassPermissions":
            return ALLOW
        if self.mode == "acceptEdits" and call.name in EDITS:
            return ALLOW
        if self.policy == "always":
            return Ask(f"{call.name} changes files or state", "medium")
        if call.name in self.always_ask:
            return Ask(f"{call.name} always asks for approval", "medium")
        if (tool is not None and tool.coordination) or call.name in FILE_TOOLS:
            return ALLOW
        if call.name == "bash":
            return ALLOW  # arguments the tool will refuse: nothing to judge
        return Ask(f"{call.name} is not known to be read-only", "medium")

    # ------------------------------------------------------------------ session files
    async def after_tool(self, call: ToolCall, outcome: ToolOutcome, ctx: ToolContext) -> ToolOutcome:
        """Note the files the agent writes (``runs code from a file the agent wrote``; its
        own new files may be removed without asking)."""
        if call.name in FILE_TOOLS and not outcome.is_error:
            try:
                path = call.parsed_arguments().get("path")
            except ValueError:
                path = None
            target = _written(ctx.workdir, path, roots=ctx.roots)
            if target is not None:
                created = self._existed.pop(call.id, (target, False))[1]
                self.written[target] = self.written.get(target, created)
        self._existed.pop(call.id, None)
        return outcome


def _needs_no_files(call: ToolCall, ctx: ToolContext, rules: RuleSet) -> bool:
    """Whether ``decide`` looks at no file for ``call`` under ``rules``: not ``bash`` (its
    command is judged against the workdir), not a file tool (where it writes), not a tool
    that may write a ``path`` argument (protected paths), and no rule with a path pattern
    about its tool (matched against the resolved path)."""
    tool = ctx.tool
    if tool is None or call.name == "bash" or call.name in FILE_TOOLS:
        return False
    if not tool.read_only:
        try:
            if isinstance(call.parsed_arguments().get("path"), str):
                return False
        except ValueError:
            pass  # no path to judge: the tool boundary reports the arguments
    if call.name in PATH_TOOLS:
        return not any(s.rule.spec is not None and s.rule.covers(call.name) for s in (*rules.deny, *rules.ask, *rules.allow))
    return True


def _bash_match(rules: Iterable[Sourced], texts: list[str]) -> Sourced | None:
    """The first Bash rule matching the whole command or any simple command in it."""
    return next((s for s in rules if s.rule.covers("bash") and any(s.rule.matches_text(t) for t in texts)), None)


def _hides_commands(script: Script) -> bool:
    """Whether some program name is computed (``$(echo rm) -rf x``) or the text could not be
    followed: no rule can be matched against what such a command runs."""
    return bool(script.errors) or any(c.words and not c.words[0].literal for c in script.commands())


def _written(workdir: Path, path: object, *, roots: Iterable[Path] = ()) -> Path | None:
    """Where a file tool writes ``path`` (``tools.write_target``), or ``None`` when it would
    refuse it."""
    if not isinstance(path, str):
        return None
    try:
        return write_target(workdir, path, roots=tuple(roots)).path
    except ToolError:
        return None


def _real(folder: Path) -> Path:
    try:
        return folder.expanduser().resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return folder


def _by(sourced: Sourced, verb: str) -> str:
    return f"{verb} by the rule {sourced.rule} ({sourced.origin})"


def _ask(reasons: list[Reason], paths: frozenset[Path] = frozenset(), workdir: Path | None = None) -> Ask:
    """One Ask for the named reasons: the two most severe, and the highest risk; the
    protected ``paths`` it would let the command write are named on the card."""
    texts = list(dict.fromkeys(r.text for r in reasons))[:2]
    risk = "high" if any(r.risk == "high" for r in reasons) else "medium"
    return _naming(Ask("; ".join(texts), risk), paths, workdir)


def _naming(decision: Ask, paths: frozenset[Path], workdir: Path | None) -> Ask:
    """``decision``, naming on its card the protected ``paths`` an approval lets the call
    write."""
    if not paths:
        return decision
    root = workdir.resolve() if workdir is not None else None
    shown = sorted(display_path(root, p) if root is not None else str(p) for p in paths)
    more = f" and {len(shown) - _NAMED_PATHS} more" if len(shown) > _NAMED_PATHS else ""
    listed = ", ".join(shown[:_NAMED_PATHS]) + more
    return Ask(f"{decision.reason}: {listed}", decision.risk, decision.paths | paths)
