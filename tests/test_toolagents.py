"""The tool-calling games' shared agents (negolib.games.toolagents): what a game must supply, and the probe of a
chat template's tool support. The agents at work are tested through the games (test_game_bilateral_agents,
test_game_market_agents)."""

from __future__ import annotations

import pytest

from negolib.games.bilateral.agents import BargainerAgents, HFBargainer
from negolib.games.multi_buyer.agents import HFSeller
from negolib.games.toolagents import HFToolAgent, LMAgents, LMOptions, split_name, template_supports_tools
from negolib.models import tiny_causal_lm


def test_lm_agents_need_a_game_subclass():
    with pytest.raises(TypeError, match="hf_cls, openai_cls, anthropic_cls"):
        LMAgents(LMOptions()).make("openai:gpt-x", "seller", 0)
    with pytest.raises(ValueError, match="not a language-model agent"):
        BargainerAgents(LMOptions()).make("boulware", "seller", 0)


def test_split_name_reads_the_three_forms_only():
    assert split_name("hf:/models/x") == ("hf", "/models/x")
    assert split_name("openai:gpt-x") == ("openai", "gpt-x")
    assert split_name("anthropic:claude") == ("anthropic", "claude")
    assert split_name("vllm:x") is None and split_name("hf:") is None and split_name("boulware") is None


def test_a_game_agent_supplies_its_chat():
    model, tok = tiny_causal_lm(seed=0)
    agent = HFToolAgent(model, tok, stats=None, tool_format="text")  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        agent.messages(object())
    assert issubclass(HFBargainer, HFToolAgent) and issubclass(HFSeller, HFToolAgent)
    assert not issubclass(HFSeller, HFBargainer)  # the markets build on the shared agent, not on another game's


def test_a_template_without_tools_is_not_taken_for_one():
    model, tok = tiny_causal_lm(seed=0)
    tok.chat_template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    assert not template_supports_tools(tok)
    tok.chat_template = ("{% if tools %}{{ tools | tojson }}{% endif %}{% for m in messages %}<|{{ m.role }}|>"
                         "{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}{% endfor %}")
    assert template_supports_tools(tok)
