"""What a root kernel's command adds to its launch (``identity.py`` says why).

As the sandbox uid (``"idmapped"``): the root helper's namespace is prepared for the
command — the workdir idmapped, what it needs reachable, root's home covered — and the
command enters it; what the uid cannot see there is neither hidden nor protected (it
cannot be mounted on, and needs no hiding). Where that fails (a workdir on a file system
without idmapping, the helper gone), the command runs in the weaker mode, with one warning.

In the weaker mode (``"root"``): root's home becomes an empty folder with the entries the
command needs bound back, the known root-only secrets are hidden, and a pids cgroup (where
one can be made) holds the process count the kernel does not keep for root.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .helper import HelperError, mount_helper
from .identity import SANDBOX_UID, home_entries, needed_paths, root_secrets
from .launch import Plan, resolver_sources
from .limits import PidsCgroup
from .notice import warn_once

__all__ = ["complete_as_root"]


def complete_as_root(plan: Plan, env: Mapping[str, str]) -> Plan:
    """``plan`` (of a root kernel's command, as ``plan.identity`` says) completed for it."""
    homes = _homes(env["HOME"], plan.workdir)
    needed = needed_paths(env, extra=[Path(p) for p in resolver_sources()] if plan.network else ())
    if plan.identity == "idmapped" and _enter_helper(plan, homes, needed):
        return plan
    plan.identity = "root"
    plan.home_binds = tuple((home, tuple(home_entries(home, needed))) for home in homes)
    plan.hidden = tuple((p, d) for p, d in plan.hidden if _outside_hidden_homes(p, plan.home_binds, plan.workdir))
    plan.secrets = tuple(root_secrets())
    if plan.limits.processes:
        plan.cgroup = PidsCgroup.make(plan.limits.processes)
    return plan


def _homes(home: str, workdir: Path) -> list[Path]:
    """Root's home folders to hide from a root kernel's commands (the one ``$HOME`` names and
    root's own), unless the working directory is one of them or holds one."""
    found: dict[Path, None] = {}
    for candidate in (home, os.path.expanduser("~root")):
        path = Path(os.path.realpath(candidate)) if candidate.startswith("/") else None
        if path is not None and path.is_dir() and path != Path("/") and not path.is_relative_to(workdir):
            found[path] = None
    return list(found)


def _enter_helper(plan: Plan, homes: list[Path], needed: list[Path]) -> bool:
    """Prepare the root helper's namespace for ``plan`` (the working directory idmapped,
    ``needed`` reachable, ``homes`` covered) and point the plan at it; ``False`` (with one
    warning) when that cannot be done here, for the weaker mode."""
    try:
        cover, reach = [str(h) for h in homes], [str(p) for p in needed]
        helper = mount_helper(SANDBOX_UID)
        failed = helper.prepare(cover=cover, reach=reach, workdir=str(plan.workdir))
        if failed is not None and failed[0] == "stale":  # the workdir was replaced: a new view
            helper = mount_helper(SANDBOX_UID, fresh=True)
            failed = helper.prepare(cover=cover, reach=reach, workdir=str(plan.workdir))
        # root-only secrets inside an idmapped workdir are the uid's own there: hide them too,
        # in this workdir and in those of earlier commands (the view keeps them mapped)
        mapped = [Path(w) for w in helper.workdirs]
        secrets = [(p, d) for p, d in root_secrets() if any(p.is_relative_to(w) for w in mapped)]
        # what the command's uid cannot see needs no hiding, and cannot be mounted on
        candidates = [*plan.protected, *(p for p, _ in (*plan.hidden, *secrets))]
        seen = dict(zip(candidates, helper.visible([str(p) for p in candidates]))) if failed is None else {}
    except HelperError as exc:
        failed = ("helper", str(exc))
    if failed is not None:
        stage, why = failed
        where = f"idmapped mounts cannot be made in {plan.workdir}" if stage == "idmap" else "the root helper failed"
        warn_once(
            f"harness_nb: {where} ({why}): commands there run as root without capabilities, a weaker "
            "sandbox (files only root may read are readable to them)."
        )
        return False
    plan.namespace = helper.namespace
    plan.protected = tuple(p for p in plan.protected if seen[p])
    plan.hidden = tuple((p, d) for p, d in plan.hidden if seen[p])
    plan.secrets = tuple((p, d) for p, d in secrets if seen[p])
    return True


def _outside_hidden_homes(path: Path, home_binds: tuple[tuple[Path, tuple[Path, ...]], ...], workdir: Path) -> bool:
    """Whether ``path`` is still there once the home folders are hidden (in the working
    directory, outside them, or in an entry bound back)."""
    if path.is_relative_to(workdir):
        return True
    for home, entries in home_binds:
        if path.is_relative_to(home):
            return any(path.is_relative_to(entry) for entry in entries)
    return True
