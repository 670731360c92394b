"""``backend="ray"``: a map's rows on a local Ray instance (one per module: two CPUs, no
dashboard, a small object store) against the fake LLM server over real HTTP. The rows run
in the workers' harnesses, their outcomes land in the kernel's store, an interrupted map
resumes with only the rows it lacked, a failing row fills the error column, typed outputs
come back as columns, and the key reaches the workers through their environment, never in
what is submitted (read off Ray's own serialization of every task and actor argument)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import pickle
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd  # noqa: F401  (frame() needs it)
import pytest

from harness_nb import Harness
from harness_nb.core import ConfigError
from harness_nb.map_ray import RowTask, WorkerSpec
from harness_nb.subagents.map_result import MapProgress
from harness_nb.testing import FakeLLMServer
from harness_support import OPEN, close_harnesses  # noqa: F401  (an autouse fixture)
from map_support import asked, row_of, upper

pytestmark = pytest.mark.ray
if importlib.util.find_spec("ray") is None:  # not imported here: every worker collects this module
    pytest.skip("needs the ray extra: pip install 'harness_nb[ray]'", allow_module_level=True)

KEY = "sk-proj-RayMapKey0123456789abcdefGHIJKL"
STUBS = Path(__file__).parent / "ray_support"


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray instance for the module's tests; its address (each harness names it in
    ``ray_address``, so the first map connects as a notebook would). Its processes get a
    home of their own, no provider keys or addresses, and ``ray_support`` first on their
    path (see its ``rfc3987_syntax``)."""
    import ray
    from ray.cluster_utils import Cluster

    changes = {"HOME": str(tmp_path_factory.mktemp("ray-home")), "PYTHONPATH": os.pathsep.join(
        filter(None, [str(STUBS), os.environ.get("PYTHONPATH")]))}
    hidden = [k for k in os.environ if k.endswith(("_API_KEY", "_BASE_URL")) or k in ("HARNESS_NB_MODEL", "RAY_ADDRESS")]
    saved = {k: os.environ.get(k) for k in [*changes, *hidden]}
    os.environ.update(changes)
    for k in hidden:
        del os.environ[k]
    try:  # the processes started here keep this environment
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 2, "include_dashboard": False, "object_store_memory": 80 * 2**20},
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield cluster.address
    finally:
        ray.shutdown()
        cluster.shutdown()


def harness(tmp_path: Path, server: FakeLLMServer, address: str, **kwargs: Any) -> Harness:
    h = Harness(
        "openai-compatible/m", workdir=tmp_path, base_url=server.url + "/v1", api_key=KEY, include_user_agents=False,
        sandbox="off", provider_options={"max_retries": 0}, ray_address=address, **kwargs,
    )
    OPEN.append(h)
    return h


async def test_rows_run_on_the_workers_and_come_back_typed_into_the_kernels_store(tmp_path, ray_address):
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        row = row_of(body)
        if row == "broken":
            return {"raw": '{"error": {"message": "refused"}}', "status": 400, "content_type": "application/json"}
        label = "bug" if row.startswith("crash") else "question"
        return {"text": json.dumps({"label": label, "score": len(row)}), "usage": {"input_tokens": 40, "output_tokens": 5}}

    rows = pd.Series(["crash one", "how two", "broken", "crash one", "how three"], index=list("abcde"))
    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv, ray_address)
        result = await h.map(
            "general-purpose", "ROW<{value}>", rows, backend="ray", concurrency=4, output="label:bug|question, score:float"
        )
    assert [(o.label, o.score) if o else None for o in result.outputs] == [
        ("bug", 9.0), ("question", 7.0), None, ("bug", 9.0), ("question", 9.0)
    ]
    frame = result.frame()
    assert frame.columns.tolist()[:2] == ["label", "score"]
    assert frame.loc["c", "error"] == "openai-compatible HTTP 400: the request was rejected: refused"
    assert frame["tokens"].tolist() == [45, 45, 0, 0, 45]  # billed here from the workers' accounts
    assert asked(srv) == {"crash one": 1, "how two": 1, "broken": 1, "how three": 1}
    # each row's transcript is beside its worker's conversation, not this harness's
    transcripts = [p.name for p in (tmp_path / ".harness_nb" / "sessions").glob(f"*.{result.map_id}-*.jsonl")]
    assert len(transcripts) == 4 and not any(name.startswith(h.session.id) for name in transcripts)
    assert 1 <= len({name.split(".")[0] for name in transcripts}) <= 2
    (stored,) = h.maps()
    assert (stored.id, stored.done, stored.failed) == (result.map_id, 4, 1)


async def test_the_key_reaches_the_workers_through_their_environment_never_in_what_is_submitted(tmp_path, ray_address):
    import ray

    ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)  # serializers need a connection
    submitted: list[bytes] = []

    def recorded(value: Any) -> bytes:  # Ray calls it on every such argument it sends, and sends what it returns
        data = pickle.dumps(value)  # an untyped map's tasks hold no function: plain pickle takes them
        submitted.append(data)
        return data

    for cls in (RowTask, WorkerSpec):
        ray.util.register_serializer(cls, serializer=recorded, deserializer=pickle.loads)
    try:
        async with FakeLLMServer([upper], loop=True) as srv:
            h = harness(tmp_path, srv, ray_address)
            result = await h.map("general-purpose", "ROW<{value}>", ["a", "b", "c"], backend="ray", concurrency=2)
    finally:
        for cls in (RowTask, WorkerSpec):
            ray.util.deregister_serializer(cls)
    assert result.texts == ["A", "B", "C"]
    assert {r.api_key for r in srv.requests} == {KEY}  # the workers had it
    kinds = Counter(type(pickle.loads(data)).__name__ for data in submitted)
    assert kinds["RowTask"] == 3 and kinds["WorkerSpec"] >= 1 and set(kinds) == {"RowTask", "WorkerSpec"}
    assert not any(KEY.encode() in data for data in submitted)


async def test_an_interrupted_map_keeps_its_rows_and_a_resume_runs_only_the_rest_on_the_workers(tmp_path, ray_address):
    slow = {"slow": 120.0}  # seconds the server takes over a row

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {**upper(body), "delay": slow.get(row_of(body), 0.0)}

    seen: list[MapProgress] = []
    rows = ["one", "slow", "two", "three"]
    async with FakeLLMServer([answer], loop=True) as srv:
        h = harness(tmp_path, srv, ray_address)
        first = asyncio.create_task(
            h.map("general-purpose", "ROW<{value}>", rows, backend="ray", concurrency=2, on_progress=seen.append)
        )
        async with asyncio.timeout(300):  # the workers start first
            while not (seen and seen[-1].finished == 3):
                await asyncio.sleep(0.05)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        kept = h.last_map.result()
        assert kept.interrupted and kept.texts == ["ONE", None, "TWO", "THREE"]

        srv.requests.clear()
        slow.clear()
        resumed = await h.map("general-purpose", "ROW<{value}>", rows, backend="ray", concurrency=2, resume=True)
    assert asked(srv) == {"slow": 1}
    assert resumed.texts == ["ONE", "SLOW", "TWO", "THREE"] and resumed.map_id == kept.map_id
    assert [row.source for row in resumed] == ["stored", "run", "stored", "stored"]


async def test_what_cannot_reach_a_worker_is_refused_before_any_row_runs(tmp_path, ray_address):
    agents = tmp_path / ".harness_nb" / "agents"
    agents.mkdir(parents=True)
    (agents / "leaky.md").write_text(
        "---\nname: leaky\ndescription: Has a key in its MCP server.\nmcpServers:\n"
        f"  - notes:\n      command: notes-server\n      env: {{TOKEN: {KEY}}}\n---\nAnswer.\n"
    )
    async with FakeLLMServer([upper], loop=True) as srv:
        h = harness(tmp_path, srv, ray_address)
        with pytest.raises(ConfigError, match="agent leaky's definition hold a key"):
            await h.map("leaky", "ROW<{value}>", ["a"], backend="ray")

        async def approve(*_args: Any) -> Any:
            raise AssertionError("never asked")

        with pytest.raises(ConfigError, match="cannot take an approval channel"):
            await h.map("general-purpose", "ROW<{value}>", ["a"], backend="ray", approval=approve)
        recording = harness(tmp_path, srv, ray_address, record_to="calls.jsonl")
        with pytest.raises(ConfigError, match="cannot record to a cassette"):
            await recording.map("general-purpose", "ROW<{value}>", ["a"], backend="ray")
    assert srv.requests == [] and h.maps() == []
