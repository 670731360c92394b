"""A map's rows on a Ray cluster: ``h.map(..., backend="ray")``, ``%agent map --backend ray``.

The map itself stays in the kernel (``AgentMap``): it keys the rows, reads and writes the
store, retries, checks typed answers, keeps the budget and reports progress. Only each
row's attempt runs on the cluster, through ``RayBackend`` (the map's ``RowBackend``):

- **Workers.** Ray actors, one per CPU the cluster has free (at most ``concurrency``), each
  holding a ``Harness`` built from the map's harness's settings and workdir, on the row's
  model (``WorkerSpec``). They are async actors: each runs many rows at once, as the kernel
  does; a row runs there exactly as it would here (``SubagentRunner.run``).
- **Credentials** reach the workers through their environment: the key and base URL of the
  row's model go into the actors' ``runtime_env`` variables (``KEY_VARIABLE``,
  ``BASE_URL_VARIABLE``), never into a task's arguments. A task (``RowTask``) carries the
  row's prompt, its agent's definition, its share of the budget and the typed answer's
  checks; what a worker is built from and the definition are checked against every secret
  this process knows (``SECRETS``) before anything is sent, and refused if one is there.
- **Bounded.** At most ``concurrency`` rows are in flight: the map's workers each wait for
  their row's task before sending another.
- **Results come back; the kernel writes them.** A task returns the row's runs and what it
  used (``RowReply``); the map stores the row as it lands, in the same store as in the
  kernel, so ``resume`` and ``h.maps()`` do not care where rows ran. A provider error comes
  back as one (retried here like any), any other failure as ``RayWorkerError``.
- **Interrupts.** A cancelled map cancels its rows' tasks (``ray.cancel``: the row's run is
  cancelled on the worker), and the actors are killed when the map ends.
- **Budgets.** A row is given what the map had left when it was sent; rows in flight at
  once may together pass it by what they use meanwhile (in the kernel every call checks the
  whole map's budget).

Which cluster: the ``ray_address`` setting, else ``$RAY_ADDRESS``, else a Ray instance
started on this machine; a process that has called ``ray.init`` itself keeps that one. The
workers need harness_nb installed and the workdir at the same path (a shared filesystem, or
this machine). Not possible there: an ``approval`` channel (nobody could answer one on a
worker) and ``record_to`` (workers would append to one cassette at once). ``ray`` is the
optional extra ``harness_nb[ray]``; it is imported when a map first asks for it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import logging
import os
import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .core import BudgetSpentError, ConfigError, ProviderError, RayWorkerError, Usage, run_blocking
from .core.secret import SECRETS
from .engine import ApprovalChannel, ParentContext, RunResult, UsageAccount
from .providers.base import Provider
from .providers.http import HTTPProvider
from .settings import RunSettings
from .subagents.definition import SubAgentDefinition
from .subagents.model import ModelResolver, resolve_model

if TYPE_CHECKING:
    from .harness import Harness

__all__ = [
    "BASE_URL_VARIABLE",
    "KEY_VARIABLE",
    "RayBackend",
    "RayWorkerError",
    "RowFailure",
    "RowReply",
    "RowTask",
    "RowWorker",
    "WorkerSpec",
]

log = logging.getLogger("harness_nb.subagents")

KEY_VARIABLE = "HARNESS_NB_MAP_API_KEY"
"""The row model's API key, in a worker's environment (its actor's ``runtime_env``)."""
BASE_URL_VARIABLE = "HARNESS_NB_MAP_BASE_URL"
"""The row model's base URL, in a worker's environment."""
INSTALL = "pip install 'harness_nb[ray]'"
MAX_ERROR_CHARS = 2_000  # of a Ray error's text kept in a row's error


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """What a worker builds its harness from: the settings' values (``RunSettings``
    itself holds derived forms that do not pickle), the workdir and the row's model."""

    settings: Mapping[str, Any]
    workdir: str
    model: str

    @classmethod
    def of(cls, settings: RunSettings, workdir: Path, model: str) -> WorkerSpec:
        values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.init}
        return cls(values, str(workdir), model)

    def harness(self) -> Harness:
        """The worker's harness: these settings, on the model, with the key and base URL
        its environment was given (``KEY_VARIABLE``, ``BASE_URL_VARIABLE``)."""
        from .harness import Harness

        if not Path(self.workdir).is_dir():
            raise ConfigError(
                f"the workdir {self.workdir} is not on this Ray worker's machine: run the map from a folder the "
                "cluster shares (the same path on every node), or on a Ray instance on this machine"
            )
        return Harness(
            self.model, workdir=self.workdir, settings=RunSettings(**self.settings),
            api_key=os.environ.get(KEY_VARIABLE) or None, base_url=os.environ.get(BASE_URL_VARIABLE) or None,
        )


@dataclass(frozen=True, slots=True)
class RowTask:
    """One attempt of one row, as a worker is sent it (nothing secret: see the module doc).
    ``wrap_provider`` and ``follow_up`` are the map's typed-answer shaper and checker, run
    on the worker as they would run here."""

    definition: SubAgentDefinition
    prompt: str
    task_id: str
    budget_usd: float | None
    token_budget: int | None
    watched: bool
    wrap_provider: Callable[[Provider], Provider] | None
    follow_up: Callable[[RunResult], str | None] | None


@dataclass(frozen=True, slots=True)
class RowFailure:
    """Why an attempt failed on a worker, in a form that crosses processes (a
    ``ProviderError`` does not pickle): rebuilt here by ``error``."""

    kind: Literal["budget", "provider", "error"]
    message: str
    provider: str = ""
    status: int | None = None
    retryable: bool = False
    retry_after: float | None = None

    @classmethod
    def of(cls, exc: Exception) -> RowFailure:
        if isinstance(exc, ProviderError):  # its text is made from these again
            return cls("provider", SECRETS.scrub(exc.message), exc.provider, exc.status, exc.retryable, exc.retry_after)
        message = SECRETS.scrub(str(exc))
        if isinstance(exc, BudgetSpentError):
            return cls("budget", message)
        return cls("error", f"{type(exc).__name__}: {message}")

    def error(self) -> Exception:
        """The exception the row's attempt would have raised in the kernel."""
        if self.kind == "budget":
            return BudgetSpentError(self.message)
        if self.kind == "provider":
            return ProviderError(
                self.message, provider=self.provider, status=self.status, retryable=self.retryable,
                retry_after=self.retry_after,
            )
        return RayWorkerError(self.message)


@dataclass(frozen=True, slots=True)
class RowReply:
    """What a worker sends back for one attempt: the runs of the row's conversation (a
    typed answer that was asked again: two), without their messages; what they used; and
    the failure, if the attempt raised."""

    runs: tuple[RunResult, ...]
    usage: Usage
    failure: RowFailure | None = None


class RowWorker:
    """The body of a worker actor: one harness, running rows as they come (many at once)."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.harness = spec.harness()
        self._unlimited: ParentContext | None = None

    def ready(self) -> bool:
        """Answered once the harness is built (the backend waits for every worker)."""
        return True

    async def run_row(self, task: RowTask) -> RowReply:
        runs: list[RunResult] = []

        def follow_up(result: RunResult) -> str | None:
            runs.append(result.model_copy(update={"messages": [], "account": None}))
            return task.follow_up(result) if task.follow_up is not None else None

        account = UsageAccount()
        try:
            parent = await self._parent(task.budget_usd, task.token_budget)
            account = parent.account.child()
            await self.harness._parts.runner.run(  # the harness's own runner: a row runs as in the kernel
                task.definition, task.prompt, parent, task_id=task.task_id, account=account, watched=task.watched,
                wrap_provider=task.wrap_provider, follow_up=follow_up,
            )
        except Exception as exc:  # sent back as the row's failure; a cancel unwinds
            return RowReply(tuple(runs), account.snapshot(), RowFailure.of(exc))
        return RowReply(tuple(runs), account.snapshot())

    async def _parent(self, budget_usd: float | None, token_budget: int | None) -> ParentContext:
        """The row's parent: one for every row without a budget; a row with one gets its
        own, whose budget scope counts only that row."""
        if budget_usd is None and token_budget is None:
            if self._unlimited is None:
                self._unlimited = await self.harness._map_parent(None, None, {})
            return self._unlimited
        budgets = {k: v for k, v in (("budget_usd", budget_usd), ("token_budget", token_budget)) if v is not None}
        return await self.harness._map_parent(None, None, budgets)


class RayBackend:
    """Runs the row attempts of a map of ``definition`` under ``parent`` on Ray workers (see
    the module doc). Made per map, from the harness's ``settings``, ``workdir`` and
    ``models`` (whose providers hold the keys): a problem that would stop every row (no
    ``ray``, an ``approval`` channel, ``record_to``, a key in what would be sent) is a
    ``ConfigError`` here, before any row runs. The cluster and the workers start with the
    first row; ``close`` kills the workers."""

    def __init__(
        self,
        settings: RunSettings,
        workdir: Path,
        models: ModelResolver,
        definition: SubAgentDefinition,
        parent: ParentContext,
        *,
        concurrency: int,
        approval: ApprovalChannel | None = None,
    ) -> None:
        if importlib.util.find_spec("ray") is None:
            raise ConfigError(f"backend='ray' needs Ray: {INSTALL}")
        if approval is not None:
            raise ConfigError("backend='ray' cannot take an approval channel: nobody could answer one on a worker")
        if settings.record_to:
            raise ConfigError(
                "backend='ray' cannot record to a cassette (record_to): every worker would append to it at once; "
                "record in the kernel (backend='kernel'), then replay"
            )
        self.spec = WorkerSpec.of(settings, workdir, resolve_model(definition.model, parent.provider.model_id))
        for what, value in (("the settings", self.spec), (f"agent {definition.name}'s definition", definition)):
            _refuse_secrets(what, value)
        self.env = _credentials(models.provider_for(definition, parent.provider))
        self.concurrency = concurrency
        self.address = settings.ray_address or None
        self._lock = asyncio.Lock()
        self._actors: list[Any] = []
        self._load: list[int] = []  # rows in flight on each actor
        self._failed: RayWorkerError | None = None
        self._ray: Any = None  # the module, imported as the workers start

    async def run(
        self,
        definition: SubAgentDefinition,
        prompt: str,
        parent: ParentContext,
        *,
        task_id: str,
        account: UsageAccount,
        watched: bool,
        wrap_provider: Callable[[Provider], Provider] | None,
        follow_up: Callable[[RunResult], str | None] | None,
    ) -> RunResult:
        """One attempt of a row, on the least busy worker; its usage is billed to
        ``account`` and its answers are checked by ``follow_up`` here too (so the map sees
        the verdicts the worker acted on)."""
        await self._start()
        ray = self._ray
        task = RowTask(
            definition, prompt, task_id, parent.remaining_usd(), parent.remaining_tokens(), watched, wrap_provider,
            follow_up,
        )
        n = min(range(len(self._actors)), key=self._load.__getitem__)
        self._load[n] += 1
        ref = self._actors[n].run_row.remote(task)
        try:
            reply: RowReply = await ref
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise
        except ray.exceptions.RayError as exc:
            raise RayWorkerError(_ray_error(exc)) from None
        finally:
            self._load[n] -= 1
        account.credit(reply.usage)
        if reply.failure is not None:
            raise reply.failure.error()
        if follow_up is not None:
            for run in reply.runs:
                follow_up(run)
        return reply.runs[-1]

    async def _start(self) -> None:
        """Connect to the cluster and start the workers, once (a failure is kept: every
        later row gets it at once rather than starting Ray again)."""
        async with self._lock:
            if self._failed is not None:
                raise self._failed
            if self._actors:
                return
            try:
                await self._launch()
            except Exception as exc:  # ray.init and actors fail in many ways, all of them Ray's
                self._failed = RayWorkerError(f"the Ray workers could not start: {_ray_error(exc)}")
                self.close()
                raise self._failed from None

    async def _launch(self) -> None:
        # importing Ray takes seconds: never on the loop
        self._ray = ray = await run_blocking(importlib.import_module, "ray")
        if not ray.is_initialized():
            await run_blocking(_init, self.address)
        free = int(ray.available_resources().get("CPU", 0))
        count = max(1, min(self.concurrency, free))
        worker = ray.remote(RowWorker).options(
            num_cpus=1, max_concurrency=self.concurrency, runtime_env={"env_vars": self.env},
            scheduling_strategy="SPREAD",
        )
        self._actors = [worker.remote(self.spec) for _ in range(count)]
        self._load = [0] * count
        log.info("map: %d Ray workers for %s", count, self.spec.model)
        await asyncio.gather(*(actor.ready.remote() for actor in self._actors))

    def close(self) -> None:
        """Kill the workers (the rows they still run end with them)."""
        if not self._actors:
            return
        import ray

        for actor in self._actors:
            try:
                ray.kill(actor)
            except Exception as exc:  # a worker already gone: nothing to kill
                log.debug("map: a Ray worker could not be killed: %s", exc)
        self._actors, self._load = [], []


def _init(address: str | None) -> None:
    """``ray.init`` (blocking: on a worker thread), quiet in the kernel: workers' output
    stays in Ray's logs."""
    import ray

    ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)


def _credentials(provider: Provider) -> dict[str, str]:
    """The environment that gives a worker ``provider``'s base URL and key."""
    if not isinstance(provider, HTTPProvider):
        return {}  # offline models (scripted/, replay/) need none
    env = {BASE_URL_VARIABLE: provider.base_url}
    key = provider.api_key()
    if key:
        env[KEY_VARIABLE] = key
    return env


def _refuse_secrets(what: str, value: Any) -> None:
    """``ConfigError`` when ``value``, pickled as it would be sent, holds a secret this
    process knows."""
    sent = pickle.dumps(value).decode("latin-1")
    if any(secret in sent for secret in SECRETS.values()):
        raise ConfigError(
            f"{what} hold a key, which would be sent to the Ray workers with every task: put it in the "
            "environment (or a .env file) of the workers instead, and name the variable"
        )


def _ray_error(exc: BaseException) -> str:
    """A Ray error's text, scrubbed and bounded."""
    text = SECRETS.scrub(str(exc)).strip()
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " …"
