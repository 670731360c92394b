"""Issue 23's first question, in a real kernel, against a server that does what llama.cpp's
did (``testing/fake_quirks.py``): with the defaults a new user has, ``%%agent`` answers, and
the cell says once that streaming is off for that server; a stream the server cuts after
some text fails its cell naming the ``%config`` line that turns streaming off."""

from __future__ import annotations

import pytest

from harness_nb.testing import FakeLLMServer
from notebook_support import notebook

pytestmark = pytest.mark.kernel

MODEL = "%config HarnessNB.model = 'openai-compatible/smol'"


async def test_the_first_question_answers_and_says_once_that_streaming_is_off(tmp_path):
    steps = [{"text": "Nothing here yet."}, {"text": "Still nothing."}]
    with FakeLLMServer(steps, stream_tools="empty_body").in_thread() as srv:
        async with notebook(tmp_path, env={"OPENAI_BASE_URL": srv.url + "/v1"}) as k:
            await k.run(MODEL)
            first = k.text(await k.run("%%agent\nwhat is in this folder?"))
            noted = "\n".join(k.widget_texts()).count("Streaming is off for this server from now on")
            second = k.text(await k.run("%%agent\nand now?"))
            noted_after = "\n".join(k.widget_texts()).count("Streaming is off for this server from now on")
    assert "Nothing here yet." in first and "Still nothing." in second
    assert (noted, noted_after) == (1, 1)  # a note in the first cell's view, none in the second's
    assert [bool(r.body.get("stream")) for r in srv.requests] == [True, False, False]


async def test_a_stream_cut_after_text_names_the_setting_as_a_notebook_sets_it(tmp_path):
    with FakeLLMServer([{"fault": "end_early", "text": "Half an ans"}]).in_thread() as srv:
        async with notebook(tmp_path, env={"OPENAI_BASE_URL": srv.url + "/v1"}) as k:
            await k.run(MODEL)
            cell = await k.run("%%agent\nwhat is in this folder?", check=False)
    assert k.error(cell).startswith("UsageError: ")
    said = k.text(cell)
    assert "the server ended the stream without a finish_reason or [DONE]" in said
    assert "To turn streaming off, run %config HarnessNB.provider_options = {'streaming': False}" in said
    assert "to Harness" not in said
