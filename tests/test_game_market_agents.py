"""Language-model and API sellers of the two markets, their prompts, private buyer threads, and the tournament default.

Local models: a tiny random Llama (noise: the plumbing is tested, every turn accounted) and a fake generator forcing
exact texts (a valid call, a malformed one, none, two; for the multi-product market a hostile message for each of
the four parts). API sellers: the real ``openai`` and ``anthropic`` SDKs over real HTTP against the local servers of
``tests/servers.py`` (multi-buyer: native tool calls well-formed, malformed, double, missing; multi-product: the
four-part text valid and broken in each part; whole markets through the game), the key never in a record or in
printed output. Buyer threads are private in the views and the seller's prompts; ``negolib tournament`` without
``--agents`` plays each market's scripted sellers against its scripted buyer pool.
"""

from __future__ import annotations

import json
import re
import warnings
from typing import Any

import pandas as pd
import pytest
from game_helpers import APIS, FAST, KEY_ENV, check_failed_request, check_key_kept, play_api_seller
from servers import ChatReply, ChatRequest, ChatServer, tool_responder, turn_responder
from test_game_bilateral_agents import QWEN_STYLE_TEMPLATE, ForcedGeneration
from test_game_bilateral_agents import Recording as BilateralRecording

from negolib.agents.base import AgentReply
from negolib.agents.hf_agent import PromptTruncationWarning
from negolib.cli import main
from negolib.core.chat_template import encode_text
from negolib.core.sampling import SamplingConfig
from negolib.core.secrets import MissingKeyError
from negolib.games import get_game
from negolib.games.base import UnknownAgent
from negolib.games.bilateral import BilateralGame
from negolib.games.multi_buyer import MultiBuyerGame
from negolib.games.multi_buyer import prompts as mb_prompts
from negolib.games.multi_buyer.agents import SPEECH as MB_SPEECH
from negolib.games.multi_buyer.agents import AnthropicSeller, HFSeller, LMOptions, OpenAISeller
from negolib.games.multi_buyer.buyers import ScriptedBuyers as MBBuyers
from negolib.games.multi_buyer.env import BuyerView as MBBuyerView
from negolib.games.multi_buyer.env import Episode as MBEpisode
from negolib.games.multi_buyer.protocol import NO_CALL_ERROR, SellerAction, format_tool_call
from negolib.games.multi_buyer.scenarios import MarketConfig as MBConfig
from negolib.games.multi_buyer.scenarios import make_scenario as mb_scenario
from negolib.games.multi_buyer.sellers import make_seller as mb_seller
from negolib.games.multi_buyer.tools import anthropic_tools, seller_tools
from negolib.games.multi_product import MultiProductGame
from negolib.games.multi_product import prompts as mp_prompts
from negolib.games.multi_product.agents import SPEECH as MP_SPEECH
from negolib.games.multi_product.buyers import ScriptedBuyers as MPBuyers
from negolib.games.multi_product.env import BuyerView as MPBuyerView
from negolib.games.multi_product.env import Episode as MPEpisode
from negolib.games.multi_product.protocol import Offer, format_message
from negolib.games.multi_product.scenarios import MarketConfig as MPConfig
from negolib.games.multi_product.scenarios import make_scenario as mp_scenario
from negolib.games.multi_product.sellers import make_seller as mp_seller
from negolib.games.toolcalls import CLOSE_TAG, OPEN_TAG, StructuredTurn, ToolCall, money, reply_turn
from negolib.models import tiny_causal_lm
from negolib.tournament import run_tournament

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTINEL = "sk-test-SENTINEL-m4rk3ts-7c1e9b02d4"
MB_SC = mb_scenario(MBConfig(n_buyers=3, turn_budget=5), 5_000_000, "t")
MP_SC = mp_scenario(MPConfig(n_products=2, n_buyers=3, turn_budget=6), 5_000_000, "t")


def call(to: str, offer: float | None = None) -> str:
    """A Hermes-style ``message_buyer`` call as a model writes it."""
    args: dict[str, Any] = {"to": to} if offer is None else {"to": to, "offer": offer}
    return f'{OPEN_TAG}\n{json.dumps({"name": "message_buyer", "arguments": args})}\n{CLOSE_TAG}'


def msg(to: str = "buyer_1", product: str = "product_1", price: str = "1000", message: str = "Hello.") -> str:
    return f"TO: {to}\nPRODUCT: {product}\nPRICE: {price}\nMESSAGE: {message}"


class Forced(ForcedGeneration, HFSeller):
    """The market seller with the bilateral tests' forced generator: each prompt gets ``script[turn]`` (the turn read
    from the prompt's last "Turn N of" line); the prompts it saw are kept as text."""


class Recording(BilateralRecording):
    """Wraps an agent and keeps every view it was asked with; ``junk`` replaces its reply on those seller turns."""

    def __init__(self, agent: Any, junk: dict[int, str] | None = None) -> None:
        super().__init__(agent)
        self.junk = junk or {}

    def act_batch(self, views):
        replies = super().act_batch(views)  # records the views
        return [AgentReply(self.junk[v.turn]) if v.turn in self.junk else r for v, r in zip(views, replies)]


class Secretive:
    """Buyers that each write a secret naming themselves (multi-buyer: with a counter; multi-product: a decline)
    and keep the views they were asked with, per buyer."""

    name = "secretive@buyer"

    def __init__(self, market: str) -> None:
        self.market, self.views = market, {}

    def act_batch(self, views):
        out = []
        for v in views:
            self.views.setdefault(v.buyer, []).append(v)
            secret = f"secret-of-buyer_{v.buyer + 1}"
            if self.market == "multi_buyer":
                out.append(AgentReply(secret, extra={"tool_calls": [{"name": "counter_offer",
                                                                       "arguments": {"price": 50.0}}]}))
            else:
                out.append(AgentReply(f"DECLINE\n{secret}"))
        return out


def tiny(template: str | None = None) -> tuple[Any, Any]:
    model, tok = tiny_causal_lm(seed=0)
    if template is not None:
        tok.chat_template = template
    return model, tok


# -- multi-buyer: the seller's chat ------------------------------------------------------------------------------
def test_multi_buyer_chat_replays_every_own_turn_from_the_last_view():
    seller = Recording(mb_seller("auctioneer", 0), junk={2: "Thinking, no call.", 4: "Two. " + call("buyer_1")
                                                          + call("buyer_2")})
    sc = mb_scenario(MBConfig(n_buyers=4, n_items=2, turn_budget=7), 5_000_003, "t")
    MultiBuyerGame().play(seller, MBBuyers(), [sc], 0)
    seen = seller.views
    last = seen[-1]
    assert [v.turn for v in seen] == list(range(1, len(seen) + 1)) and len(seen) >= 5
    assert all(mb_prompts.past_view(last, v.turn) == v for v in seen)  # refused turns and sales rebuilt too
    assert [r.turn for r in last.refused] == [2, 4] and last.refused[0].message == "Thinking, no call."
    native = mb_prompts.chat_messages(last)
    users = [m["content"] for m in native if m["role"] == "user"]
    assert users == [mb_prompts.turn_message(v) for v in seen]
    assert "Your last turn had no effect: " + NO_CALL_ERROR in users[2] and "double tool call" in users[4]
    assert {"role": "assistant", "content": "Thinking, no call."} in native  # a refused turn: its prose only
    calls = [m for m in native if m.get("tool_calls")]
    assert len(calls) == len(seen) - 1 - 2 and all(m["tool_calls"][0]["function"]["name"] == "message_buyer"
                                                  for m in calls)
    text = mb_prompts.chat_messages(last, "text")
    assert "<tools>" in text[0]["content"] and "<tools>" not in native[0]["content"]
    assert all("tool_calls" not in m and m["role"] != "tool" for m in text)
    k, first = next((k, e) for k, t in enumerate(last.threads) for e in t if e.turn == 1)
    assert text[2]["content"] == f"{first.message}\n{format_tool_call(SellerAction(k, first.price))}"
    assert text[3]["content"].startswith("Result of your message_buyer call: buyer_")
    assert mb_prompts.chat_messages(last, drop=2)[1]["content"] == mb_prompts.turn_message(seen[2])
    with pytest.raises(ValueError, match="tool_format"):
        mb_prompts.chat_messages(last, "json")  # type: ignore[arg-type]


def test_multi_buyer_system_prompt_states_cost_budget_buyers_and_protocol():
    view = MBEpisode(MB_SC).view()
    system = mb_prompts.system_prompt(view)
    for text in (f"Your cost is {money(MB_SC.cost)} per item", "You have 5 turns in all, shared across the buyers",
                 "3 buyers, buyer_1 .. buyer_3", "message_buyer(to, offer)", "Each buyer's thread is private"):
        assert text in system
    assert all(money(b) not in system for b in MB_SC.budgets)  # budgets are the buyers' own


# -- multi-buyer: local models -----------------------------------------------------------------------------------
MB_SCRIPT = {
    1: "Hello buyer_1, what would you pay? " + call("buyer_1"),
    2: 'Broken. <tool_call>\n{"name": "message_buyer", "arguments": {"to": "buyer_2"}\n</tool_call>',  # malformed
    3: "Let me think about it.",  # no call
    4: "Two at once. " + call("buyer_2") + call("buyer_3"),  # double call
    5: "A firm price for you. " + call("buyer_2", 1e6),
}


@pytest.mark.parametrize("template", [QWEN_STYLE_TEMPLATE, None], ids=["native", "text"])
def test_multi_buyer_forced_turns_are_parsed_and_bad_parses_counted_like_the_episode(template):
    model, tok = tiny(template)
    seller = Forced(model, tok, SamplingConfig(max_new_tokens=8), speech=MB_SPEECH, name="forced", prompt_cap=8192,
                    script=MB_SCRIPT)
    assert seller.tool_format == ("native" if template else "text")
    (rec,) = MultiBuyerGame().play(seller, MBBuyers(), [MB_SC], 0)
    out = rec["outcome"]
    assert rec["status"] == "no_deal" and out["seller_turns"] == 5 and out["seller_bad_parses"] == 3
    assert out["addressed"] == [0, None, None, None, 1]
    st = seller.tool_stats
    assert (st.turns, st.calls, st.bad_parses, st.no_calls, st.double_calls) == (5, 2, 3, 1, 1)
    seller_turns = [t for t in rec["turns"] if t["role"] == "seller"]
    assert [t["raw"] for t in seller_turns] == list(MB_SCRIPT.values())
    errors = [t["parse_error"] for t in seller_turns]
    assert errors[0] is None and "malformed JSON" in errors[1] and errors[2] == NO_CALL_ERROR
    assert errors[3].startswith("double tool call") and errors[4] is None
    assert seller_turns[4]["action"] == {"name": "message_buyer", "arguments": {"to": "buyer_2", "offer": 1e6}}
    prompt = seller.prompts[-1]  # turn 5: the whole history
    system = prompt.split("<|im_start|>user")[0]
    assert f"Your cost is {money(MB_SC.cost)} per item" in system and "You have 5 turns in all" in system
    assert system.count('"name": "message_buyer"') == 1 + (template is None) * 2  # schema (+ the text examples)
    assert f"<|im_start|>assistant\nHello buyer_1, what would you pay?\n{call('buyer_1')}<|im_end|>" in prompt
    assert "<|im_start|>assistant\nBroken.<|im_end|>" in prompt  # the malformed call is not replayed
    assert "Your last turn had no effect: malformed JSON" in prompt
    assert "Your last turn had no effect: " + NO_CALL_ERROR in prompt
    answer = rec["turns"][1]
    assert answer["role"] == "buyer" and answer["buyer"] == 0
    result = f'buyer_1 wrote: "{answer["message"]}" and countered at {money(answer["action"]["arguments"]["price"])}.'
    if template:
        assert "# Tools" in system and f"<tool_response>\n{result}\n</tool_response>" in prompt
    else:
        assert "<|im_start|>tool" not in prompt and f"Result of your message_buyer call: {result}" in prompt


def test_market_prompt_cap_drops_the_oldest_own_turns_and_says_so():
    model, tok = tiny()
    seller = Forced(model, tok, SamplingConfig(max_new_tokens=8), speech=MB_SPEECH, script=MB_SCRIPT)
    ep = MBEpisode(MB_SC)
    for text in ("A. " + call("buyer_1"), "B.", "C. " + call("buyer_3")):
        ep.step(text)
        if ep.to_move == "buyer":
            ep.step(reply_turn(MBBuyers().act(ep.view())))
    view = ep.view()  # turn 4: three own past turns
    sizes = [len(encode_text(tok, seller.render(view, k))) for k in (0, 1, 3)]
    assert sizes[0] > sizes[1] > sizes[2]
    seller.prompt_cap = sizes[1]
    with pytest.warns(PromptTruncationWarning, match="dropped the 1 oldest of its 3 own past turns"):
        (rep,) = seller.act_batch([view])
    assert rep.extra["history_dropped"] == 1 and len(rep.extra["prompt_ids"]) == sizes[1]
    assert "Turn 1 of 5" not in seller.prompts[-1] and "Turn 2 of 5" in seller.prompts[-1]
    assert seller.tool_stats.prompts_capped == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", PromptTruncationWarning)
        seller.prompt_cap = sizes[0]
        assert seller.prompt_ids(view)[1] == 0


@pytest.mark.parametrize("game_cls, speech, scs", [
    (MultiBuyerGame, MB_SPEECH, [MB_SC, mb_scenario(MBConfig(n_buyers=3, turn_budget=3), 5_000_001, "t")]),
    (MultiProductGame, MP_SPEECH, [MP_SC, mp_scenario(MPConfig(n_products=2, n_buyers=3, turn_budget=3), 5, "t")]),
], ids=["multi_buyer", "multi_product"])
def test_a_tiny_random_model_sells_batched_and_every_turn_is_accounted(game_cls, speech, scs):
    model, tok = tiny(QWEN_STYLE_TEMPLATE)
    game = game_cls()

    def run(seed: int) -> tuple[HFSeller, list[dict[str, Any]]]:
        agent = HFSeller(model, tok, SamplingConfig(max_new_tokens=8, seed=seed), speech=speech, name="tiny",
                         prompt_cap=8192, max_batch=2)
        return agent, game.play(agent, game.make_agent("pool", "buyer", 0), scs, 0)

    agent, recs = run(0)
    assert all(r["status"] in ("deal", "no_deal") for r in recs), [r.get("error") for r in recs]
    assert agent.tool_format == ("native" if game_cls is MultiBuyerGame else "text")  # four-part: text only
    st = agent.tool_stats
    played = [t for r in recs for t in r["turns"] if t["role"] == "seller"]
    assert st.turns == len(played) == sum(r["outcome"]["seller_turns"] for r in recs) >= 2
    refused = [t for t in played if t["parse_error"] is not None or t.get("violation") is not None]
    assert st.bad_parses == len(refused)
    if game_cls is MultiBuyerGame:
        assert st.bad_parses == sum(r["outcome"]["seller_bad_parses"] for r in recs)
        assert st.calls + st.bad_parses == st.turns
    else:
        out = [r["outcome"] for r in recs]
        assert st.valid == sum(o["valid_messages"] for o in out)
        assert st.bad_parts == {p: sum(o["bad_parts"].get(p, 0) for o in out) for p in st.bad_parts}
    assert agent.stats.calls >= 2 and agent.stats.decode_tokens > 0
    assert agent.settings()["game"] == game.name
    _, again = run(0)
    assert [t["raw"] for r in again for t in r["turns"]] == [t["raw"] for r in recs for t in r["turns"]]


# -- multi-product: the seller's chat and local models -----------------------------------------------------------
def test_multi_product_chat_replays_every_own_message_from_the_last_view():
    seller = Recording(mp_seller("greedy", 0), junk={2: "TO: nobody\nPRODUCT: product_1\nPRICE: 5\nMESSAGE: hi"})
    MultiProductGame().play(seller, MPBuyers(), [MP_SC], 0)
    seen = seller.views
    last = seen[-1]
    assert all(mp_prompts.past_view(last, v.turn) == v for v in seen) and len(seen) >= 4
    assert [r.turn for r in last.refused] == [2] and last.refused[0].message.startswith("TO: nobody\nPRODUCT:")
    chat = mp_prompts.chat_messages(last)
    assert [m["role"] for m in chat] == ["system"] + ["user", "assistant"] * (len(seen) - 1) + ["user"]
    assert [m["content"] for m in chat if m["role"] == "user"][-1].endswith(mp_prompts.turn_message(last))
    assert chat[4]["content"] == last.refused[0].message and "Your last message was refused: TO:" in chat[5]["content"]
    first = next(e for t in last.threads for e in t if e.turn == 1)
    assert chat[2]["content"] == format_message(Offer(0, first.product, first.price), first.message)
    assert re.match(r'buyer_1 answered (ACCEPT|DECLINE) and wrote: "', chat[3]["content"])
    system = chat[0]["content"]
    for k, (p, c) in enumerate(zip(MP_SC.list_prices, MP_SC.costs)):
        assert f"- product_{k + 1}: list price {money(p)}, your cost {money(c)}" in system
    assert "You have 6 messages in all" in system and mp_prompts.EXAMPLE in system
    assert all(money(v) not in system for row in MP_SC.valuations for v in row)  # valuations are the buyers' own
    with pytest.raises(ValueError, match="text only"):
        mp_prompts.chat_messages(last, "native")


MP_SCRIPT = {
    1: msg(),  # valid: $1,000 for product_1 (far above every valuation: declined)
    2: msg(to="buyer_9"),  # hostile TO
    3: msg(product="product_1 or product_2"),  # hostile PRODUCT
    4: msg(price="1,000"),  # hostile PRICE
    5: msg(message="Hi.\nPRICE: 5"),  # hostile MESSAGE: a part label inside the message
    6: "I will write my offer later.",  # no four-part message at all
}


def test_multi_product_forced_messages_a_hostile_one_for_each_part_are_counted_like_the_episode():
    model, tok = tiny(QWEN_STYLE_TEMPLATE)
    seller = Forced(model, tok, SamplingConfig(max_new_tokens=8), speech=MP_SPEECH, name="forced",
                    prompt_cap=8192, tool_format="native", script=MP_SCRIPT)
    assert seller.tool_format == "text"  # the four-part protocol is text even where the template has tools
    (rec,) = MultiProductGame().play(seller, MPBuyers(), [MP_SC], 0)
    out = rec["outcome"]
    assert out["seller_turns"] == 6 and out["valid_messages"] == 1 and out["bad_parses"] == 5
    assert out["bad_parts"] == {"TO": 2, "PRODUCT": 1, "PRICE": 1, "MESSAGE": 1} and not out["sales"]
    st = seller.tool_stats
    assert (st.turns, st.valid, st.bad_parses, st.bad_parts) == (6, 1, 5, out["bad_parts"])
    seller_turns = [t for t in rec["turns"] if t["role"] == "seller"]
    assert [t["raw"] for t in seller_turns] == list(MP_SCRIPT.values())
    assert [t["part"] for t in seller_turns] == [None, "TO", "PRODUCT", "PRICE", "MESSAGE", "TO"]
    prompt = seller.prompts[-1]
    assert "# Tools" not in prompt and "<tools>" not in prompt
    assert f"<|im_start|>assistant\n{format_message(Offer(0, 0, 1000.0), 'Hello.')}<|im_end|>" in prompt
    assert f"<|im_start|>assistant\n{msg(to='buyer_9')}<|im_end|>" in prompt  # the refused text, as written
    assert "Your last message was refused: TO: unknown recipient 'buyer_9'" in prompt
    assert "Your last message was refused: MESSAGE: a line of the message starts with a part label" in prompt


# -- private threads ---------------------------------------------------------------------------------------------
def _only_in_answers_from(chat: list[dict[str, Any]], secret: str, buyer: str) -> bool:
    """Whether every message of the seller's chat holding ``secret`` holds it in an answer of ``buyer``."""
    ids = {c["id"]: c["function"]["arguments"]["to"] for m in chat for c in m.get("tool_calls") or ()}
    found = False
    for m in chat:
        if secret not in m["content"]:
            continue
        found = True
        if m["role"] == "tool":
            if ids[m["tool_call_id"]] != buyer:
                return False
            continue
        lines = [line for line in m["content"].split("\n") if secret in line]
        if m["role"] != "user" or not all(re.match(rf'(Result of your message_buyer call: )?{buyer} (wrote|answered)',
                                                    line) for line in lines):
            return False
    return found


@pytest.mark.parametrize("market", ["multi_buyer", "multi_product"])
def test_a_buyer_never_sees_another_buyers_messages_and_the_seller_sees_every_thread(market):
    if market == "multi_buyer":
        seller = Recording(mb_seller("probe_all", 0))
        sc = mb_scenario(MBConfig(n_buyers=4, turn_budget=8), 5_000_002, "t")
        game, prompts, view_type = MultiBuyerGame(), mb_prompts, MBBuyerView
    else:
        seller = Recording(mp_seller("greedy", 0))
        sc = mp_scenario(MPConfig(n_products=2, n_buyers=3, turn_budget=8), 5_000_002, "t")
        game, prompts, view_type = MultiProductGame(), mp_prompts, MPBuyerView
    buyers = Secretive(market)
    (rec,) = game.play(seller, buyers, [sc], 0)
    assert rec["status"] != "error" and len(buyers.views) == sc.n_buyers  # every buyer was asked
    secrets = {k: f"secret-of-buyer_{k + 1}" for k in range(sc.n_buyers)}
    for k, views in buyers.views.items():  # a buyer's views: its own thread, nobody else's words
        assert all(isinstance(v, view_type) and v.buyer == k for v in views)
        assert not any(s in repr(v) for v in views for j, s in secrets.items() if j != k)
    assert any(secrets[1] in repr(v) for v in buyers.views[1]) or len(buyers.views[1]) == 1
    last = seller.views[-1]
    for k, thread in enumerate(last.threads):  # buyer_2's message is in buyer_2's thread only
        assert secrets[k] in [e.message for e in thread if e.role == "buyer"]
        assert all(secrets[j] not in e.message for e in thread for j in secrets if j != k)
    fmts = ("native", "text") if market == "multi_buyer" else ("text",)
    for fmt in fmts:
        chat = prompts.chat_messages(last, fmt)
        for k, secret in secrets.items():  # the seller sees them all, each in an answer of its own buyer
            assert _only_in_answers_from(chat, secret, f"buyer_{k + 1}"), (fmt, k)


# -- API sellers over real HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


def api_seller(api: str, server: ChatServer, speech: Any, **kw: Any) -> OpenAISeller | AnthropicSeller:
    cls = OpenAISeller if api == "openai" else AnthropicSeller
    return cls("seller", "test-model", speech=speech, api_key_env=KEY_ENV, base_url=server.base_url, retry=FAST,
               **kw)


def mb_at_turn_2() -> MBEpisode:
    """The multi-buyer seller to move on turn 2, after a valid call to buyer_1 and its answer."""
    ep = MBEpisode(MB_SC)
    ep.step(StructuredTurn("Opening.", [ToolCall("message_buyer", {"to": "buyer_1"})]))
    ep.step(reply_turn(MBBuyers().act(ep.view())))
    return ep


TO_2 = {"name": "message_buyer", "arguments": {"to": "buyer_2", "offer": 150}}
MB_CASES = {  # case: (text, calls, expected action, expected error fragment)
    "well_formed": ("Buyer 2, it is yours at 150.", [TO_2], {"name": "message_buyer",
                                                             "arguments": {"to": "buyer_2", "offer": 150.0}}, None),
    "malformed": ("Here.", [{"name": "message_buyer", "arguments": '{"to": "buyer_2"'}], None, "malformed JSON"),
    "unknown_buyer": ("Here.", [{"name": "message_buyer", "arguments": {"to": "buyer_7"}}], None, "unknown recipient"),
    "double": ("Both.", [TO_2, {"name": "message_buyer", "arguments": {"to": "buyer_3"}}], None, "double tool call"),
    "missing": ("I would rather wait.", [], None, NO_CALL_ERROR),
}


@pytest.mark.parametrize("case", list(MB_CASES))
@pytest.mark.parametrize("api", APIS)
def test_multi_buyer_native_tool_calls_over_real_http(api, case, api_key):
    text, calls, action, error = MB_CASES[case]
    ep = mb_at_turn_2()
    with ChatServer(api, responder=tool_responder(text, calls)) as srv:
        seller = api_seller(api, srv, MB_SPEECH)
        (rep,) = seller.act_batch([ep.view()])
    assert rep.error is None and rep.text == text and len(rep.extra["tool_calls"]) == len(calls)
    json.dumps(rep.extra["tool_calls"])  # plain data, not SDK objects
    body = srv.stats.bodies[0]
    assert body["tools"] == (seller_tools(3) if api == "openai" else anthropic_tools(seller_tools(3)))
    answer = ep.threads[0][-1].message
    if api == "openai":  # the seller's first turn went back as a native call, the buyer's answer as its result
        assert body["messages"][2]["tool_calls"][0]["function"] == {"name": "message_buyer",
                                                                    "arguments": '{"to": "buyer_1"}'}
        assert body["messages"][3]["role"] == "tool" and body["messages"][3]["tool_call_id"] == "call_turn1"
        assert body["messages"][3]["content"].startswith(f'buyer_1 wrote: "{answer}"')
    else:
        use = body["messages"][1]["content"][-1]
        assert use["type"] == "tool_use" and use["input"] == {"to": "buyer_1"}
        result = body["messages"][2]["content"][0]
        assert result["tool_use_id"] == use["id"] and result["content"].startswith(f'buyer_1 wrote: "{answer}"')
    rec = ep.step(reply_turn(rep))
    assert rec["action"] == action and rec["message"] == text
    assert (rec["parse_error"] is None) if error is None else (error in rec["parse_error"])
    assert rep.extra["parse_error"] == rec["parse_error"]
    st = seller.tool_stats
    assert (st.calls, st.bad_parses, st.double_calls, st.no_calls) == (
        int(action is not None), int(error is not None), int(case == "double"), int(case == "missing"))
    assert ep.to_move == ("buyer" if action else "seller")


MP_CASES = {  # case: (text, the failing part or None)
    "valid": (msg("buyer_2", "product_2", "999.50", "A fair price for you."), None),
    "to": (msg(to="buyer_1; buyer_2"), "TO"),
    "product": (msg(product="product_3"), "PRODUCT"),
    "price": (msg(price="99.5 dollars"), "PRICE"),
    "message": (msg(message="OK.\nTO: buyer_3"), "MESSAGE"),
}


@pytest.mark.parametrize("case", list(MP_CASES))
@pytest.mark.parametrize("api", APIS)
def test_multi_product_four_part_text_over_real_http(api, case, api_key):
    text, part = MP_CASES[case]
    ep = MPEpisode(MP_SC)
    ep.step(msg("buyer_1", "product_1", "500"))
    ep.step(MPBuyers().act(ep.view()).text)  # declined: the seller is to move on turn 2
    with ChatServer(api, responder=turn_responder(text)) as srv:
        seller = api_seller(api, srv, MP_SPEECH)
        (rep,) = seller.act_batch([ep.view()])
    assert rep.error is None and rep.text == text and "tool_calls" not in rep.extra
    body = srv.stats.bodies[0]
    assert "tools" not in body
    msgs = body["messages"]
    first = format_message(Offer(0, 0, 500.0), "Hello.")
    if api == "openai":
        assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"] and msgs[2]["content"] == first
    else:
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"] and msgs[1]["content"] == first
        assert mp_prompts.EXAMPLE in body["system"]
    assert msgs[-1]["content"].startswith("buyer_1 answered DECLINE")
    rec = ep.step(rep.text)
    assert rec["part"] == part and (rec["offer"] == {"to": "buyer_2", "product": "product_2", "price": 999.5}
                                    if part is None else rec["offer"] is None)
    assert rep.extra["parse_error"] == rec["parse_error"]
    st = seller.tool_stats
    assert (st.valid, st.bad_parses, st.bad_parts) == (int(part is None), int(part is not None),
                                                       {part: 1} if part else {})


# -- whole markets through the games, with keys kept out of everything ----------------------------------------------
def mb_bot(req: ChatRequest) -> ChatReply:
    """An API seller: asks each buyer in turn for 1.3 times its cost."""
    cost = float(re.search(r"Your cost is \$([\d,]+\.\d\d)", req.messages[0]["content"])[1].replace(",", ""))
    turn = int(re.findall(r"Turn (\d+) of", req.messages[-1]["content"])[-1])
    n = int(re.search(r"with (\d) buyers", req.messages[0]["content"])[1])
    to = f"buyer_{(turn - 1) % n + 1}"
    return ChatReply(f"Dear {to}, a good price.", 50, 8, tool_calls=[
        {"name": "message_buyer", "arguments": {"to": to, "offer": round(1.3 * cost, 2)}}])


def mp_bot(req: ChatRequest) -> ChatReply:
    """An API seller: offers the first open product to the first open buyer at its list price."""
    last = req.messages[-1]["content"]
    product = re.search(r"Open products: (product_\d+)", last)[1]
    buyer = re.search(r"Buyers who have not bought: (buyer_\d+)", last)[1]
    price = re.search(rf"- {product}: list price \$([\d,]+\.\d\d)", req.messages[0]["content"])[1].replace(",", "")
    return ChatReply(msg(buyer, product, price, "A list-price offer."), 50, 8)


@pytest.mark.parametrize("market", ["multi_buyer", "multi_product"])
@pytest.mark.parametrize("api", APIS)
def test_an_api_seller_plays_whole_markets_through_the_game(market, api, monkeypatch, capsys, tmp_path):
    game = get_game(market)
    game = type(game)(["base"], lm=LMOptions(retry=FAST))
    scenarios = game.tournament_scenarios(3)
    failing = f"Your cost is {money(scenarios[2].cost)}" if market == "multi_buyer" else \
        f"your cost {money(scenarios[2].costs[0])}"
    # the third market meets a provider that echoes the key in a 401: that episode only fails
    seller, records, srv = play_api_seller(monkeypatch, game, api, mb_bot if market == "multi_buyer" else mp_bot,
                                           failing, "pool", scenarios,
                                           OpenAISeller if api == "openai" else AnthropicSeller, SENTINEL)
    ok, failed = records[:2], records[2]
    check_failed_request(game, failed)
    for rec in ok:
        out = rec["outcome"]
        assert rec["status"] in ("deal", "no_deal") and game.payoffs(rec).valid
        if market == "multi_buyer":
            assert out["seller_bad_parses"] == 0 and out["seller_turns"] >= 1
            sellers = [t for t in rec["turns"] if t["role"] == "seller"]
            assert all(t["raw_tool_calls"][0]["name"] == "message_buyer" for t in sellers)
        else:
            assert out["bad_parses"] == 0 and out["valid_messages"] == out["seller_turns"] >= 1
    assert seller.tool_stats.failed == 1 and seller.tool_stats.bad_parses == 0
    for body in srv.stats.bodies:
        assert ("tools" in body) is (market == "multi_buyer")
    check_key_kept(SENTINEL, srv, records, seller, capsys, tmp_path, "status")


# -- agents by name ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("game_cls", [MultiBuyerGame, MultiProductGame])
def test_make_agent_builds_language_model_sellers_by_name(game_cls, tmp_path, monkeypatch):
    model, tok = tiny_causal_lm(seed=0)
    model.save_pretrained(tmp_path / "tiny")
    tok.save_pretrained(tmp_path / "tiny")
    game = game_cls(lm=LMOptions(sampling=SamplingConfig(max_new_tokens=4), max_batch=3, prompt_cap=8192))
    path = f"hf:{tmp_path / 'tiny'}"
    seller = game.make_agent(path, "seller", 7)
    again = game.make_agent(f"{path}+pool", "seller", 8)
    assert isinstance(seller, HFSeller) and seller.name == f"{path}@seller" and seller.speech is game.speech
    assert again.model is seller.model and seller.sampling.seed == 7 and seller.max_batch == 3
    assert seller.settings()["game"] == game.name and seller.tool_format == "text"
    buyer = game.make_agent(path, "buyer", 7)  # in the buyer role a language-model name reads as the pool
    assert buyer.name == "pool@buyer" and buyer.backend == "scripted"
    sc = game.tournament_scenarios(1)[0]
    ep = (MBEpisode if game_cls is MultiBuyerGame else MPEpisode)(sc)
    (rep,) = seller.act_batch([ep.view()])
    assert rep.error is None and rep.output_tokens > 0 and "parse_error" in rep.extra
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY is not set"):
        game.make_agent("openai:gpt-test", "seller", 0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    claude = game.make_agent("anthropic:claude-test", "seller", 0)
    assert isinstance(claude, AnthropicSeller) and claude.name == "anthropic:claude-test@seller"
    assert claude.settings()["game"] == game.name and SENTINEL not in json.dumps(claude.settings())
    for bad in ("gpt", "hf:", "vllm:m", "openai"):
        with pytest.raises(UnknownAgent, match=r"hf:<path>, openai:<model>, anthropic:<model>"):
            game.make_agent(bad, "seller", 0)
    with pytest.raises(ValueError, match="no model folder"):
        game.make_agent(f"hf:{tmp_path / 'missing'}", "seller", 0)
    with pytest.raises(ValueError, match="play the seller"):
        game.lm_agents.make(path, "buyer", 0)


# -- the tournament's default agents -----------------------------------------------------------------------------
def test_default_agents_are_the_scripted_strategies_unless_a_game_says_otherwise(tmp_path):
    bilateral = BilateralGame()
    assert bilateral.default_agents() == bilateral.scripted_strategies()
    for game in (MultiBuyerGame(["base"]), MultiProductGame(["small"])):
        assert game.default_agents() == tuple(sorted(game.sellers))
        assert {game.make_agent(a, "buyer", 0).name for a in game.default_agents()} == {"pool@buyer"}
        res = run_tournament(game, None, 1, tmp_path / game.name, progress=False)  # None: the game's defaults
        assert res.agents == game.default_agents() and res.played == len(game.sellers) ** 2 and res.n_errors == 0


@pytest.mark.parametrize("name", ["multi_buyer", "multi_product"])
def test_cli_tournament_without_agents_plays_scripted_sellers_against_the_buyer_pool(name, tmp_path, capsys,
                                                                                      monkeypatch):
    game = get_game(name)
    sellers = list(game.scripted_strategies())
    pairs = []
    real_play = type(game).play

    def counted(self, seller, buyer, scenarios, seed, progress=False):  # type: ignore[no-untyped-def]
        pairs.append((seller.name, buyer.name))
        return real_play(self, seller, buyer, scenarios, seed, progress)

    monkeypatch.setattr(type(game), "play", counted)
    args = ["tournament", "--game", name, "--seeds", "1", "--out", str(tmp_path), "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"no --agents given; playing the game's default agents: {', '.join(sellers)}" in out
    k = len(sellers)
    assert f"{k * k} matches played, 0 already complete" in out
    assert {s for s, _ in pairs} == {f"{s}@seller" for s in sellers} and {b for _, b in pairs} == {"pool@buyer"}
    cross = pd.read_csv(tmp_path / "cross_table.csv")
    n_scenarios = len(game.tournament_scenarios(1))
    assert len(cross) == k * k and (cross["n_episodes"] == n_scenarios).all() and (cross["n_errors"] == 0).all()
    by_seller = cross.groupby("seller")["seller_payoff"].nunique()
    assert (by_seller == 1).all()  # every "buyer" column is the same pool: one payoff per seller
    assert main(args) == 0 and "0 matches played" in capsys.readouterr().out
