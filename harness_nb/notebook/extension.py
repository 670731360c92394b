"""``%load_ext harness_nb``: register the magics, the input transformers and the settings.
Nothing runs and no folder is created until a magic is used.

The extension's state lives on its ``HarnessMagics`` (found with ``harness_magics``), as
IPython's own extensions keep theirs; nothing is added to the shell or its objects."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from traitlets import TraitError

from ..core.imports import shielded_imports
from ..tools import kill_running_commands
from . import harness_magics
from .config import SettingsMagics
from .controller import NotebookHarness
from .kernel.transform import PromptMagicTransformer, await_our_magics, name_unknown_agents
from .magics.agent import HarnessMagics
from .magics.mcp import McpMagics
from .magics.skill import SkillMagics
from .magics.team import TeamMagics

OUR_MAGICS = (SettingsMagics, HarnessMagics, TeamMagics, SkillMagics, McpMagics)


def _post_transform(lines: list[str]) -> list[str]:
    with shielded_imports():
        from IPython import get_ipython

    shell = get_ipython()
    magics = harness_magics(shell)
    if magics is not None and any("_magic('@" in line for line in lines):
        lines = name_unknown_agents(lines, magics.knows_agent)
    return await_our_magics(lines, shell)


def load(shell: Any) -> None:
    """Register harness_nb with ``shell`` (a second load is a no-op)."""
    if harness_magics(shell) is not None:
        return
    try:
        controller = NotebookHarness(shell)
    except TraitError as exc:  # a bad value in an IPython config file or $HARNESS_NB_*
        raise UsageError(f"harness_nb is not loaded: {str(exc).rstrip('.')}. Fix it, then %load_ext harness_nb again") from None
    shell.configurables.append(controller.config)
    shell.register_magics(SettingsMagics(shell, controller.config, shell.find_line_magic("config")))
    magics = HarnessMagics(shell, controller)
    shell.register_magics(magics)
    shell.register_magics(TeamMagics(shell, controller))
    shell.register_magics(SkillMagics(shell, controller))
    shell.register_magics(McpMagics(shell, controller))
    token_transformers = shell.input_transformer_manager.token_transformers
    if PromptMagicTransformer not in token_transformers:
        token_transformers.insert(0, PromptMagicTransformer)
    if _post_transform not in shell.input_transformers_post:
        shell.input_transformers_post.append(_post_transform)
    shell.events.register("pre_run_cell", magics.refresh_agents)
    shell.events.register("pre_run_cell", controller.before_cell)
    shell.events.register("pre_run_cell", controller.republish_settled)
    shell.events.register("post_run_cell", controller.republish_settled)
    shell.events.register("post_run_cell", controller.history.after_cell)
    shell.events.register("post_run_cell", controller.proposals.after_cell)
    controller.queued_cells.install()
    controller.bridge.open()
    magics.refresh_agents()


def unload(shell: Any) -> None:
    """Remove what ``load`` registered and stop background work and running commands."""
    magics = harness_magics(shell)
    if magics is None:
        return
    controller = magics.controller
    shell.events.unregister("pre_run_cell", magics.refresh_agents)
    shell.events.unregister("pre_run_cell", controller.before_cell)
    shell.events.unregister("pre_run_cell", controller.republish_settled)
    shell.events.unregister("post_run_cell", controller.republish_settled)
    shell.events.unregister("post_run_cell", controller.history.after_cell)
    shell.events.unregister("post_run_cell", controller.proposals.after_cell)
    controller.queued_cells.uninstall()
    if _post_transform in shell.input_transformers_post:
        shell.input_transformers_post.remove(_post_transform)
    token_transformers = shell.input_transformer_manager.token_transformers
    if PromptMagicTransformer in token_transformers:
        token_transformers.remove(PromptMagicTransformer)
    table = shell.magics_manager.magics
    settings_magics = shell.magics_manager.registry.get(SettingsMagics.__name__)
    if settings_magics is not None and table["line"].get("config") == settings_magics.config_line:
        table["line"]["config"] = settings_magics.ipython_config
    for kind in ("line", "cell"):
        for name in [n for n in table[kind] if n.startswith("@") or n in ("agent", "agents", "task", "team", "skills", "mcp", "fix", "approvals")]:
            table[kind].pop(name, None)
    if controller.config in shell.configurables:
        shell.configurables.remove(controller.config)
    controller.close()
    kill_running_commands()  # a command of a cell still running must not outlive the extension
    for cls in OUR_MAGICS:  # harness_magics(shell) is None from here: a %load_ext starts afresh
        shell.magics_manager.registry.pop(cls.__name__, None)
