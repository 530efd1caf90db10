"""Language-model and API agents of bilateral price bargaining: the tool-call protocol on every backend.

Local models: a tiny random Llama (its text is noise, so the plumbing is tested: prompts rendered with the tool
schemas, a template with tool support and one without, outputs parsed and bad parses counted) and a fake generator
that forces exact texts. API agents: the real ``openai`` and ``anthropic`` SDKs over real HTTP against the local
servers of ``tests/servers.py`` (well-formed, malformed, missing and double calls, a call plus an accept, a whole
episode through ``BilateralGame.play``), and the key never reaching a record or printed output.
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import replace
from typing import Any

import pytest
from game_helpers import APIS, FAST, KEY_ENV, check_failed_request, check_key_kept, play_api_seller
from servers import ChatReply, ChatRequest, ChatServer, Fault, tool_responder

from negolib.agents.base import AgentReply
from negolib.agents.hf_agent import PromptTruncationWarning
from negolib.core.chat_template import decode_turn, encode_text
from negolib.core.sampling import SamplingConfig
from negolib.core.secrets import MissingKeyError
from negolib.games.base import UnknownAgent
from negolib.games.bilateral import BilateralGame
from negolib.games.bilateral.agents import AnthropicBargainer, HFBargainer, OpenAIBargainer
from negolib.games.bilateral.env import BilateralConfig, Episode
from negolib.games.bilateral.play import play_episodes, reply_turn
from negolib.games.bilateral.prompts import chat_messages, past_view, system_prompt, turn_message
from negolib.games.bilateral.protocol import CLOSE_TAG, OPEN_TAG, Action, StructuredTurn, ToolCall, parse_turn
from negolib.games.bilateral.scenarios import make_scenario
from negolib.games.bilateral.scripted import make_scripted
from negolib.games.bilateral.tools import anthropic_tools, openai_tools
from negolib.games.toolagents import LMOptions, anthropic_messages, openai_messages, template_supports_tools
from negolib.models import tiny_causal_lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTINEL = "sk-test-SENTINEL-b1lat3ral-4e8d2a6c90"
SC = make_scenario("1k", 5_000_000)  # cost $1,428.91, value $1,485.53

# A Qwen2.5-style template (Hermes tool calls: schemas in <tools>, calls in <tool_call> tags, results in
# <tool_response> inside a user turn), as transformers renders real tool-calling models.
QWEN_STYLE_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}"
    "\\n</tool_call><|im_end|>\\n' }}"
    "{%- else %}{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def call(name: str, **args: Any) -> str:
    """A Hermes-style tool call as a model writes it."""
    return f'{OPEN_TAG}\n{json.dumps({"name": name, "arguments": args})}\n{CLOSE_TAG}'


# Seller turns 1, 3, 5, 7, 9 of one episode: one of each kind of turn.
SCRIPT = {
    1: "I open high. " + call("make_offer", price=9000),
    3: 'Oops. <tool_call>\n{"name": "make_offer", "arguments": {"price": 8000}\n</tool_call>',  # malformed
    5: "Two prices. " + call("make_offer", price=8500) + call("make_offer", price=8400),  # double call
    7: "Let me think about it.",  # prose only
    9: "Take it or leave it. " + call("make_offer", price=8000) + call("accept_offer"),  # a call plus an accept
}


def tiny(template: str | None = None) -> tuple[Any, Any]:
    model, tok = tiny_causal_lm(seed=0)
    if template is not None:
        tok.chat_template = template
    return model, tok


class ForcedGeneration:
    """A deterministic generator for a local tool agent (mixed in before it): each prompt gets ``script[turn]`` (the
    turn read from the prompt's last "Turn N of" line); the prompts it saw are kept as text."""

    def __init__(self, *args: Any, script: dict[int, str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.script, self.prompts = script, []

    def generate_ids(self, prompts, seed):
        comps = []
        for p in prompts:
            text = self.tokenizer.decode(list(p))
            self.prompts.append(text)
            turn = int(re.findall(r"Turn (\d+) of", text)[-1])
            comps.append(encode_text(self.tokenizer, self.script[turn]) + [self.tags.stop_ids[0]])
        return comps, [[0.0] * len(c) for c in comps], [True] * len(comps)


class ForcedHF(ForcedGeneration, HFBargainer):
    """The bilateral local-model agent with the forced generator."""


class Recording:
    """Wraps an agent and keeps every view it was asked with."""

    def __init__(self, agent: Any) -> None:
        self.agent, self.name, self.views = agent, agent.name, []

    def act_batch(self, views):
        self.views += list(views)
        return self.agent.act_batch(views)


def episode_at_turn_3() -> Episode:
    """The seller to move on turn 3: its offer of $2,000 and the buyer's of $900 stand."""
    ep = Episode(SC)
    ep.step(StructuredTurn("Opening.", [ToolCall("make_offer", {"price": 2000})]))
    ep.step(StructuredTurn("Too much.", [ToolCall("make_offer", {"price": 900})]))
    return ep


# -- the chat history -------------------------------------------------------------------------------------------
def test_chat_replays_the_views_the_party_saw_with_native_calls_and_results():
    seller = Recording(make_scripted("linear", "seller", 0))
    play_episodes(seller, make_scripted("fixed_price", "buyer", 0), [SC])  # no deal: all 5 seller turns
    seen = seller.views
    last = seen[-1]
    assert [v.turn for v in seen] == [1, 3, 5, 7, 9]
    assert all(past_view(last, v.turn) == v for v in seen)  # the earlier views, rebuilt from the last one
    msgs = chat_messages(last)
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant", "tool"] * 4 + ["user"]
    assert msgs[0]["content"] == system_prompt(last) and "<tools>" not in msgs[0]["content"]
    users = [m["content"] for m in msgs if m["role"] == "user"]
    assert users == [turn_message(v) for v in seen]
    own = [h for h in last.history if h.role == "seller"]
    for i, h in enumerate(own):
        assistant, tool = msgs[2 + 3 * i], msgs[3 + 3 * i]
        (c,) = assistant["tool_calls"]
        assert assistant["content"] == h.message and c["function"] == h.action
        assert tool["tool_call_id"] == c["id"] == f"call_turn{h.turn}"
        assert tool["content"] == f"Your offer of ${h.offer:,.2f} is standing."
    assert len({m["tool_calls"][0]["id"] for m in msgs if m.get("tool_calls")}) == 4
    later = chat_messages(last, drop=3)
    assert later[1]["content"] == turn_message(seen[3]) and len(later) == 1 + 3 + 1
    with pytest.raises(ValueError, match="tool_format"):
        chat_messages(last, "json")  # type: ignore[arg-type]


def test_text_format_chat_writes_calls_as_the_tool_call_text_the_prompt_asks_for():
    ep = episode_at_turn_3()
    msgs = chat_messages(ep.view(), "text")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "<tools>" in msgs[0]["content"] and all("tool_calls" not in m for m in msgs)
    assistant = msgs[2]["content"]
    assert assistant.startswith("Opening.\n<tool_call>\n{") and assistant.endswith("</tool_call>")
    assert parse_turn(assistant).action == Action("make_offer", 2000.0)
    example = msgs[0]["content"].split("end your turn with the call")[1]  # the system prompt's own example
    assert example.split("\n")[1] == OPEN_TAG and assistant.split("\n")[1] == OPEN_TAG
    assert msgs[3]["content"].startswith("Result of your make_offer call: Your offer of $2,000.00 is standing.\n")
    assert msgs[3]["content"].endswith(turn_message(ep.view()))


def test_chat_shows_an_invalid_accept_as_the_call_made_and_a_refused_call_as_prose():
    ep = Episode(SC)
    ep.step("Let me accept. " + call("accept_offer"))  # nothing to accept yet
    ep.step("Hello.")
    ep.step("Both. " + call("make_offer", price=3000) + call("walk_away"))  # refused: two calls
    ep.step("Well?")
    native = chat_messages(ep.view())
    c = native[2]["tool_calls"][0]["function"]
    assert c == {"name": "accept_offer", "arguments": {}} and native[3]["content"].startswith("Error: invalid accept")
    assert native[5] == {"role": "assistant", "content": "Both."}  # the refused calls are gone, the prose stays
    assert "Your last turn changed nothing: double tool call" in native[6]["content"]
    text = chat_messages(ep.view(), "text")
    assert parse_turn(text[2]["content"]).action == Action("accept_offer")
    assert text[3]["content"].startswith("Result of your accept_offer call: Error: invalid accept")


def test_provider_shapes_of_the_chat_are_valid_conversations():
    ep = Episode(SC)
    ep.step(call("make_offer", price=2000))  # a call without a message
    ep.step("No.")
    ep.step("")  # nothing at all
    ep.step("Still no.")
    chat = chat_messages(ep.view())
    oa = openai_messages(chat)
    assert oa[2]["content"] is None and json.loads(oa[2]["tool_calls"][0]["function"]["arguments"]) == {
        "price": 2000.0}
    assert oa[3] == {"role": "tool", "tool_call_id": "call_turn1", "content": "Your offer of $2,000.00 is standing."}
    assert oa[5] == {"role": "assistant", "content": "(no message)"}
    system, turns = anthropic_messages(chat)
    assert system == chat[0]["content"] and [t["role"] for t in turns] == ["user", "assistant", "user",
                                                                            "assistant", "user"]
    assert turns[1]["content"] == [{"type": "tool_use", "id": "call_turn1", "name": "make_offer",
                                    "input": {"price": 2000.0}}]
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_turn1",
                                      "content": "Your offer of $2,000.00 is standing."}
    assert turns[2]["content"][1]["type"] == "text" and turns[3]["content"] == [{"type": "text",
                                                                                  "text": "(no message)"}]
    assert all(b.get("text", "x") for t in turns for b in t["content"])  # no empty text block


# -- local models -----------------------------------------------------------------------------------------------
def test_tool_support_is_detected_from_the_template():
    _, tok = tiny()
    assert not template_supports_tools(tok)  # ChatML without tools
    tok.chat_template = QWEN_STYLE_TEMPLATE
    assert template_supports_tools(tok)
    tok.chat_template = "{% if tools %}{{ tools | tojson }}{% endif %}" + tiny()[1].chat_template
    assert not template_supports_tools(tok)  # shows the schemas but drops past tool calls
    tok.chat_template = ("{% for m in messages %}{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}"
                         "{% endif %}{{ m['content'] }}{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}")
    assert not template_supports_tools(tok)  # refuses a tool result


@pytest.mark.parametrize("template", [QWEN_STYLE_TEMPLATE, None], ids=["native", "text"])
def test_forced_turns_are_parsed_and_bad_parses_counted_like_the_episode(template):
    model, tok = tiny(template)
    seller = ForcedHF(model, tok, SamplingConfig(max_new_tokens=8), name="forced", prompt_cap=8192, script=SCRIPT)
    assert seller.tool_format == ("native" if template else "text")
    (rec,) = play_episodes(seller, make_scripted("fixed_price", "buyer", 0), [SC])
    out = rec["outcome"]
    assert rec["status"] == "no_deal" and out["end"] == "deadline" and out["seller_offer"] == 9000.0
    assert (out["seller_bad_parses"], out["seller_prose_only"]) == (3, 1)
    st = seller.tool_stats
    assert (st.turns, st.calls, st.prose_only, st.bad_parses, st.double_calls) == (5, 1, 1, 3, 2)
    errors = [t["parse_error"] for t in rec["turns"] if t["role"] == "seller"]
    assert errors[0] is None and "malformed JSON" in errors[1] and errors[3] is None
    assert errors[2].startswith("double tool call") and errors[4].startswith("double tool call")
    assert [t["raw"] for t in rec["turns"] if t["role"] == "seller"] == list(SCRIPT.values())
    prompt = seller.prompts[-1]  # turn 9: the whole history
    first_call = '<tool_call>\n{"name": "make_offer", "arguments": {"price": 9000.0}}\n</tool_call>'
    system = prompt.split("<|im_start|>user")[0]
    assert system.count('"name": "walk_away"') == system.count('"description": "Make a binding offer') == 1
    assert f"<|im_start|>assistant\nI open high.\n{first_call}<|im_end|>" in prompt
    assert "<|im_start|>assistant\nOops.<|im_end|>" in prompt  # the malformed call is not replayed
    assert "Your last turn changed nothing: malformed JSON" in prompt
    assert "<|im_start|>assistant\nLet me think about it.<|im_end|>" in prompt
    if template:
        assert "# Tools" in system
        assert "<tool_response>\nYour offer of $9,000.00 is standing.\n</tool_response>" in prompt
    else:
        assert "<|im_start|>tool" not in prompt and "Result of your make_offer call: Your offer of $9,000.00" in prompt
        example = '<tool_call>\n{"name": "make_offer", "arguments": {"price": 123.45}}\n</tool_call>'
        assert example in system  # the history's calls are laid out as the prompt's own example


def test_tool_call_tags_marked_special_survive_decoding():
    model, tok = tiny()
    tok.add_special_tokens({"additional_special_tokens": [OPEN_TAG, CLOSE_TAG]})
    seller = ForcedHF(model, tok, SamplingConfig(max_new_tokens=8), prompt_cap=8192,
                      script={1: "Here. " + call("make_offer", price=1600)})
    ids = encode_text(tok, SCRIPT[1])
    assert OPEN_TAG not in decode_turn(tok, ids, seller.tags)  # what the shared decoder alone would give
    (rep,) = seller.act_batch([Episode(SC).view()])
    assert rep.text == "Here. " + call("make_offer", price=1600) and rep.extra["parse_error"] is None
    assert parse_turn(rep.text).action == Action("make_offer", 1600.0)


def test_prompt_cap_drops_the_oldest_own_turns_and_says_so():
    model, tok = tiny()
    seller = ForcedHF(model, tok, SamplingConfig(max_new_tokens=8), script=SCRIPT)
    ep = Episode(SC)
    for text in ("A. " + call("make_offer", price=4000), "B.", "C. " + call("make_offer", price=3000), "D."):
        ep.step(text)
    view = ep.view()  # turn 5: two own past turns
    sizes = [len(encode_text(tok, seller.render(view, k))) for k in (0, 1, 2)]
    assert sizes[0] > sizes[1] > sizes[2]
    seller.prompt_cap = sizes[1]
    with pytest.warns(PromptTruncationWarning, match="dropped the 1 oldest of its 2 own past turns"):
        (rep,) = seller.act_batch([view])
    assert rep.extra["history_dropped"] == 1 and len(rep.extra["prompt_ids"]) == sizes[1]
    assert "A." not in seller.prompts[-1].split("<tools>")[-1] and "Turn 3 of 10" in seller.prompts[-1]
    seller.prompt_cap = sizes[2] - 5
    with pytest.warns(PromptTruncationWarning) as got:
        ids, dropped = seller.prompt_ids(view)
    assert dropped == 2 and len(ids) == sizes[2] - 5 and ids == encode_text(tok, seller.render(view, 2))[5:]
    assert ["dropped the 2 oldest" in str(w.message) for w in got] == [True, False]
    assert "with no history left; keeping its last" in str(got[1].message)
    assert seller.tool_stats.prompts_capped == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptTruncationWarning)
        seller.prompt_cap = sizes[0]
        assert seller.prompt_ids(view)[1] == 0  # fits: nothing dropped, no warning


@pytest.mark.parametrize("template", [QWEN_STYLE_TEMPLATE, None], ids=["native", "text"])
def test_a_tiny_random_model_plays_batched_and_every_turn_is_accounted(template):
    model, tok = tiny(template)
    cfg = BilateralConfig(deadline_turns=4)
    scs = [SC, make_scenario("10", 5_000_001)]

    def run(seed: int) -> tuple[HFBargainer, list[dict[str, Any]]]:
        agent = HFBargainer(model, tok, SamplingConfig(max_new_tokens=8, seed=seed), name="tiny", prompt_cap=8192,
                            max_batch=2)
        return agent, play_episodes(agent, make_scripted("linear", "buyer", 0), scs, cfg)

    agent, recs = run(0)
    assert all(r["status"] in ("deal", "no_deal") for r in recs), [r.get("error") for r in recs]
    seller_turns = [t for r in recs for t in r["turns"] if t["role"] == "seller"]
    st = agent.tool_stats
    assert st.turns == len(seller_turns) == sum(r["outcome"]["seller_turns"] for r in recs) >= 2
    assert st.calls + st.prose_only + st.bad_parses == st.turns
    assert st.bad_parses == sum(r["outcome"]["seller_bad_parses"] for r in recs)
    assert st.prose_only == sum(r["outcome"]["seller_prose_only"] for r in recs)
    assert agent.stats.calls >= 2 and agent.stats.decode_tokens > 0  # generated, in batches of both episodes
    (rep,) = agent.act_batch([Episode(SC).view()])
    prompt = tok.decode(rep.extra["prompt_ids"])
    assert "<tools>" in prompt and '"name": "walk_away"' in prompt and rep.extra["tool_format"] == agent.tool_format
    assert rep.extra["parse_error"] == parse_turn(rep.text).error
    assert agent.settings()["tool_format"] == ("native" if template else "text")
    _, again = run(0)
    assert [t["raw"] for r in again for t in r["turns"]] == [t["raw"] for r in recs for t in r["turns"]]


# -- API agents over real HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


def api_agent(api: str, server: ChatServer, **kw: Any) -> OpenAIBargainer | AnthropicBargainer:
    cls = OpenAIBargainer if api == "openai" else AnthropicBargainer
    return cls("seller", "test-model", api_key_env=KEY_ENV, base_url=server.base_url, retry=FAST, **kw)


OFFER = {"name": "make_offer", "arguments": {"price": 1500}}
ACCEPT = {"name": "accept_offer", "arguments": {}}
CASES = {  # case: (text, calls, expected action, expected error fragment, the episode closes)
    "well_formed": ("Meet me at 1500.", [OFFER], Action("make_offer", 1500.0), None, False),
    "malformed": ("Here.", [{"name": "make_offer", "arguments": '{"price": 15'}], None, "malformed JSON", False),
    "ill_typed": ("Here.", [{"name": "make_offer", "arguments": {"price": "1,500"}}], None, "must be a number", False),
    "missing": ("I would rather talk first.", [], None, None, False),
    "double": ("Two.", [OFFER, {"name": "make_offer", "arguments": {"price": 1400}}], None, "double tool call", False),
    "call_plus_accept": ("Or I accept.", [OFFER, ACCEPT], None, "double tool call", False),
    "accept": ("Deal.", [ACCEPT], Action("accept_offer"), None, True),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("api", APIS)
def test_native_tool_calls_over_real_http(api, case, api_key):
    text, calls, action, error, closes = CASES[case]
    ep = episode_at_turn_3()
    with ChatServer(api, responder=tool_responder(text, calls)) as srv:
        agent = api_agent(api, srv)
        (rep,) = agent.act_batch([ep.view()])
    assert rep.error is None and rep.text == text and len(rep.extra["tool_calls"]) == len(calls)
    json.dumps(rep.extra["tool_calls"])  # plain data, not SDK objects
    body = srv.stats.bodies[0]
    assert body["tools"] == (openai_tools() if api == "openai" else anthropic_tools())
    if api == "openai":  # the seller's own first turn went back as a native call with its result
        assert body["messages"][2]["tool_calls"][0]["function"] == {"name": "make_offer",
                                                                    "arguments": '{"price": 2000.0}'}
        assert body["messages"][3]["role"] == "tool" and body["messages"][3]["tool_call_id"] == "call_turn1"
    else:
        assert body["messages"][1]["content"][-1]["type"] == "tool_use"
        assert body["messages"][2]["content"][0]["tool_use_id"] == body["messages"][1]["content"][-1]["id"]
    rec = ep.step(reply_turn(rep))
    assert rec.action == (action.to_dict() if action else None)
    assert (rec.parse_error is None) if error is None else (error in rec.parse_error)
    assert rec.message == text and ep.done is closes
    if closes:
        assert ep.outcome.deal and ep.outcome.price == 900.0 and ep.outcome.closed_by == "seller"
    else:  # a refused call changes no offer
        assert ep.standing == {"seller": 1500.0 if action else 2000.0, "buyer": 900.0}
    st = agent.tool_stats
    assert (st.calls, st.prose_only, st.bad_parses) == (int(action is not None), int(case == "missing"),
                                                        int(error is not None))
    assert st.double_calls == int(case in ("double", "call_plus_accept"))


@pytest.mark.parametrize("api", APIS)
def test_a_failed_request_is_that_episodes_error_reply(api, api_key):
    views = [Episode(make_scenario(t, 5_000_000)).view() for t in ("10", "1k", "100k")]
    fault = Fault("500", count=None, match="of the order of $1,000.00")
    with ChatServer(api, responder=tool_responder("Mine.", [OFFER]), faults=[fault]) as srv:
        agent = api_agent(api, srv)
        replies = agent.act_batch(views)
    assert [r.error is None for r in replies] == [True, False, True]
    assert "HTTP 500" in replies[1].error and "tool_calls" not in replies[1].extra
    assert all(r.extra["tool_calls"][0]["name" if api == "anthropic" else "function"] for r in (replies[0], replies[2]))
    assert agent.tool_stats.failed == 1 and agent.tool_stats.calls == 2


def seller_bot(req: ChatRequest) -> ChatReply:
    """An API seller: asks twice its cost, then accepts the buyer's standing offer from its third turn on."""
    cost = float(re.search(r"Your cost for the item is \$([\d,]+\.\d\d)", req.messages[0]["content"])[1]
                 .replace(",", ""))
    last = req.messages[-1]["content"]
    turn = int(re.search(r"Turn (\d+) of", last)[1])
    if turn >= 5 and "the buyer's offer $" in last:
        return ChatReply("All right, deal.", 50, 8, tool_calls=[ACCEPT])
    return ChatReply(f"My price is {2 * cost:.2f}.", 50, 8,
                     tool_calls=[{"name": "make_offer", "arguments": {"price": round(2 * cost, 2)}}])


@pytest.mark.parametrize("api", APIS)
def test_an_api_seller_plays_whole_episodes_through_the_game(api, monkeypatch, capsys, tmp_path):
    game = BilateralGame(lm=LMOptions(retry=FAST))
    scenarios = game.tournament_scenarios(1)  # one seed in each of the five tiers
    # the $100k episode meets a provider that echoes the key in a 401: that episode only fails
    seller, records, srv = play_api_seller(monkeypatch, game, api, seller_bot, "$100,000.00", "linear", scenarios,
                                           OpenAIBargainer if api == "openai" else AnthropicBargainer, SENTINEL)
    ok, failed = records[:4], records[4]
    check_failed_request(game, failed)
    for rec in ok:
        turns, out = rec["turns"], rec["outcome"]
        assert rec["status"] == "deal" and out["closed_by"] == "seller" and len(turns) == 5
        assert out["price"] == turns[3]["buyer_offer"] == turns[3]["action"]["arguments"]["price"]
        assert out["seller_bad_parses"] == out["seller_prose_only"] == 0
        assert turns[0]["raw_tool_calls"][0]["name"] == "make_offer" and turns[0]["message"].startswith("My price")
        assert turns[4]["action"] == {"name": "accept_offer", "arguments": {}}
    assert seller.tool_stats.calls == 12 and seller.tool_stats.failed == 1
    for body in srv.stats.bodies:  # every request offered the tools and held a valid native conversation
        assert body["tools"] and _valid_conversation(api, body["messages"])
    check_key_kept(SENTINEL, srv, records, seller, capsys, tmp_path, "deal")


def _valid_conversation(api: str, messages: list[dict[str, Any]]) -> bool:
    """Whether every tool call is answered by the next message(s) and roles are as the provider wants them."""
    if api == "openai":
        for i, m in enumerate(messages):
            for j, c in enumerate(m.get("tool_calls") or ()):
                reply = messages[i + 1 + j]
                if reply["role"] != "tool" or reply["tool_call_id"] != c["id"]:
                    return False
                json.loads(c["function"]["arguments"])
        return messages[0]["role"] == "system"
    roles = [m["role"] for m in messages]
    if roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:])):
        return False
    for i, m in enumerate(messages):
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"] if uses else []
        if uses != results:
            return False
    return True


# -- agents by name ---------------------------------------------------------------------------------------------
def test_make_agent_builds_each_form_and_names_the_forms_it_accepts(tmp_path, monkeypatch):
    model, tok = tiny_causal_lm(seed=0)
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    game = BilateralGame(lm=LMOptions(sampling=SamplingConfig(max_new_tokens=4), max_batch=3, prompt_cap=8192))
    seller = game.make_agent(f"hf:{tmp_path / 'tiny'}", "seller", 7)
    buyer = game.make_agent(f"hf:{tmp_path / 'tiny'}", "buyer", 8)
    assert isinstance(seller, HFBargainer) and seller.name == f"hf:{tmp_path / 'tiny'}@seller"
    assert seller.model is buyer.model  # loaded once
    assert seller.sampling == replace(SamplingConfig(max_new_tokens=4), seed=7) and seller.max_batch == 3
    assert seller.prompt_cap == 8192 and seller.settings()["tool_format"] == "text"
    assert seller.tool_format == "text"  # the tiny tokenizer's ChatML has no tool support
    (rep,) = seller.act_batch([Episode(SC).view()])
    assert isinstance(rep, AgentReply) and rep.error is None and rep.output_tokens > 0
    assert rep.extra["tool_format"] == "text" and "<tools>" in tok.decode(rep.extra["prompt_ids"])
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY is not set"):
        game.make_agent("openai:gpt-test", "seller", 0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    claude = game.make_agent("anthropic:claude-test", "buyer", 0)
    assert isinstance(claude, AnthropicBargainer) and claude.name == "anthropic:claude-test@buyer"
    assert claude.model == "claude-test" and SENTINEL not in json.dumps(claude.settings())
    for bad in ("gpt", "hf:", "vllm:m", "openai"):
        with pytest.raises(UnknownAgent, match=r"known: boulware, .*hf:<path>, openai:<model>, anthropic:<model>"):
            game.make_agent(bad, "seller", 0)
    with pytest.raises(ValueError, match="no model folder"):
        game.make_agent(f"hf:{tmp_path / 'missing'}", "seller", 0)
