"""Settings that change which agents a notebook sees."""

from __future__ import annotations

import pytest

from notebook_support import notebook

pytestmark = pytest.mark.kernel

AGENT = "---\nname: home-helper\ndescription: An agent from the home folder.\n---\nYou help.\n"


async def test_user_agent_folders_can_be_left_out(tmp_path):
    """A teaching notebook should not depend on what the person keeps in ~/.claude/agents."""
    home_agents = tmp_path / "home" / ".claude" / "agents"
    home_agents.mkdir(parents=True)
    (home_agents / "home-helper.md").write_text(AGENT)
    async with notebook(tmp_path) as k:
        listed = k.text(await k.run("%agents"))
        assert "home-helper  [" in listed and ".claude/agents/home-helper.md]" in listed
        await k.run("%config HarnessNB.include_user_agents = False")
        listed = k.text(await k.run("%agents"))
        assert "home-helper" not in listed and "general-purpose" in listed
        cell = await k.run("%@home-helper hello", check=False)
        assert "%@home-helper: no agent of that name" in k.error(cell) and "%@general-purpose" in k.error(cell)
