"""``%load_ext harness_nb``: register the magics, the input transformers and the settings.
Nothing runs and no folder is created until a magic is used."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from traitlets import TraitError

from ..core.imports import shielded_imports
from ..tools import kill_running_commands
from .config import SettingsMagics
from .controller import NotebookHarness
from .magics import HarnessMagics, sync_agent_magics
from .mcp_magics import McpMagics
from .skill_magics import SkillMagics
from .team_magics import TeamMagics
from .transform import PromptMagicTransformer, await_our_magics

_STATE = "_harness_nb"


def _post_transform(lines: list[str]) -> list[str]:
    with shielded_imports():
        from IPython import get_ipython

    return await_our_magics(lines, get_ipython())


def load(shell: Any) -> None:
    """Register harness_nb with ``shell`` (a second load is a no-op)."""
    if getattr(shell, _STATE, None) is not None:
        return
    try:
        controller = NotebookHarness(shell)
    except TraitError as exc:  # a bad value in an IPython config file or $HARNESS_NB_*
        raise UsageError(f"harness_nb is not loaded: {str(exc).rstrip('.')}. Fix it, then %load_ext harness_nb again") from None
    setattr(shell, _STATE, controller)
    shell.configurables.append(controller.config)
    shell.register_magics(SettingsMagics(shell, controller.config, shell.find_line_magic("config")))
    shell.register_magics(HarnessMagics(shell, controller))
    shell.register_magics(TeamMagics(shell, controller))
    shell.register_magics(SkillMagics(shell, controller))
    shell.register_magics(McpMagics(shell, controller))
    token_transformers = shell.input_transformer_manager.token_transformers
    if PromptMagicTransformer not in token_transformers:
        token_transformers.insert(0, PromptMagicTransformer)
    if _post_transform not in shell.input_transformers_post:
        shell.input_transformers_post.append(_post_transform)

    def refresh_agents(*_args: Any) -> None:
        # agent files added or edited since the last cell become %@name magics now
        try:
            harness = controller.harness()
        except UsageError:
            return  # no harness can be made with these settings: the agent's own cells say why
        if harness.registry.changed_on_disk():
            harness.registry.reload()
        sync_agent_magics(shell, controller)

    controller.refresh_agents = refresh_agents  # type: ignore[attr-defined]
    shell.events.register("pre_run_cell", refresh_agents)
    shell.events.register("pre_run_cell", controller.before_cell)
    shell.events.register("post_run_cell", controller.history.after_cell)
    shell.events.register("post_run_cell", controller.proposals.after_cell)
    controller.queued_cells.install()
    refresh_agents()


def unload(shell: Any) -> None:
    """Remove what ``load`` registered and stop background work and running commands."""
    controller: NotebookHarness | None = getattr(shell, _STATE, None)
    if controller is None:
        return
    shell.events.unregister("pre_run_cell", controller.refresh_agents)  # type: ignore[attr-defined]
    shell.events.unregister("pre_run_cell", controller.before_cell)
    shell.events.unregister("post_run_cell", controller.history.after_cell)
    shell.events.unregister("post_run_cell", controller.proposals.after_cell)
    controller.queued_cells.uninstall()
    if _post_transform in shell.input_transformers_post:
        shell.input_transformers_post.remove(_post_transform)
    token_transformers = shell.input_transformer_manager.token_transformers
    if PromptMagicTransformer in token_transformers:
        token_transformers.remove(PromptMagicTransformer)
    magics = shell.magics_manager.magics
    settings_magics = shell.magics_manager.registry.pop(SettingsMagics.__name__, None)
    if settings_magics is not None and magics["line"].get("config") == settings_magics.config_line:
        magics["line"]["config"] = settings_magics.ipython_config
    for kind in ("line", "cell"):
        for name in [n for n in magics[kind] if n.startswith("@") or n in ("agent", "agents", "task", "team", "skills", "mcp", "fix", "approvals")]:
            magics[kind].pop(name, None)
    if controller.config in shell.configurables:
        shell.configurables.remove(controller.config)
    controller.close()
    kill_running_commands()  # a command of a cell still running must not outlive the extension
    setattr(shell, _STATE, None)
