"""The options of ``h.map`` / ``h.start_map`` (``MapOptions``), and their check: a name
``h.map`` does not know is a ``ConfigError`` with the closest known name, never a silently
plain map (``check_options``)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict, get_args

from pydantic import BaseModel

from ..core import ConfigError
from ..engine import ApprovalChannel
from .map_result import MapProgress

__all__ = ["MAP_BACKENDS", "MAP_OPTIONS", "MapBackendName", "MapOptions", "check_options"]

MapBackendName = Literal["kernel", "ray"]
MAP_BACKENDS: tuple[str, ...] = get_args(MapBackendName)


class MapOptions(TypedDict, total=False):
    """How ``Harness.map`` / ``start_map`` run (each optional; the defaults in brackets):
    ``concurrency`` (8), ``retries`` (3), ``budget_usd`` and ``token_budget`` for the whole
    map (the harness's), ``model`` and ``approval`` (the harness's), ``on_progress``,
    ``output`` (a pydantic model, a mapping of field names to types or a text such as
    ``"label:bug|question, score:float"``: typed answers; none), ``resume`` (``True``: the
    newest stored map of the same key, or a map id; ``False``), ``mode`` (``"online"``;
    ``"batch"``: every row one call through the vendor's batch API, at half the price),
    ``batch_size`` (most rows a batch; the vendor's most), ``backend`` (``"kernel"``: the
    rows run in this process; ``"ray"``: on a Ray cluster, ``map_ray.py``) and, with
    ``estimate=True``, ``sample`` (20)."""

    concurrency: int
    retries: int
    budget_usd: float | None
    token_budget: int | None
    model: str | None
    approval: ApprovalChannel | None
    on_progress: Callable[[MapProgress], Any] | None
    output: type[BaseModel] | Mapping[str, Any] | str | None
    resume: bool | str
    mode: Literal["online", "batch"]
    batch_size: int | None
    backend: MapBackendName
    sample: int


MAP_OPTIONS: tuple[str, ...] = (*MapOptions.__annotations__, "estimate")
"""Every option ``Harness.map`` takes by name (``estimate`` is its own keyword)."""


def _number(low: float) -> Callable[[Any], bool]:
    return lambda v: v is None or (isinstance(v, int | float) and not isinstance(v, bool) and v > low)


def _whole(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 0)


_VALUES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "budget_usd": (_number(0), "a number of dollars above 0, or None"),
    "token_budget": (_whole, "a whole number of tokens above 0, or None"),
    "model": (lambda v: v is None or isinstance(v, str), "a provider/model string, or None"),
    "approval": (lambda v: v is None or callable(v), "an approval channel (an async function), or None"),
    "on_progress": (lambda v: v is None or callable(v), "a function taking a MapProgress, or None"),
    "resume": (lambda v: isinstance(v, bool | str), "True, False or a stored map's id (h.maps() lists them)"),
    "backend": (lambda v: v in MAP_BACKENDS, " or ".join(repr(b) for b in MAP_BACKENDS)),
    "estimate": (lambda v: isinstance(v, bool), "True or False"),
    "mode": (lambda v: v in ("online", "batch"), "'online' or 'batch' (one call a row through the vendor's batch API)"),
    "batch_size": (_whole, "a whole number of rows above 0, or None (the vendor's most)"),
    "sample": (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number of rows, 1 or more"),
}


def check_options(options: Mapping[str, Any], *, estimate: bool = False) -> None:
    """``ConfigError`` naming every option of ``options`` that ``h.map`` does not know
    (with the closest known name), else the first whose value is not what it takes.
    ``concurrency`` and ``retries`` are checked by ``AgentMap``, ``output`` by ``row_output``."""
    unknown = [name for name in options if name not in MAP_OPTIONS]
    if unknown:
        problems = []
        for name in unknown:
            close = difflib.get_close_matches(name, MAP_OPTIONS, n=1)
            problems.append(f"{name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise ConfigError(f"unknown map option {', '.join(problems)}; the options are {', '.join(MAP_OPTIONS)}")
    for name, value in options.items():
        if name in _VALUES and not _VALUES[name][0](value):
            raise ConfigError(f"map option {name}={value!r}: it takes {_VALUES[name][1]}")
    if "sample" in options and not estimate:
        raise ConfigError("map option sample= goes with estimate=True (how many rows the estimate runs)")
    batch = options.get("mode") == "batch"
    if estimate and batch:
        raise ConfigError(
            "estimate=True runs a sample online: drop mode='batch' for the estimate (a batch sends the same tokens "
            "at half the price)"
        )
    if options.get("batch_size") is not None and not batch:
        raise ConfigError("map option batch_size= goes with mode='batch' (most rows a batch)")
