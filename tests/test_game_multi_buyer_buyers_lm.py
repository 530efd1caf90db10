"""Language-model and API buyers of the multi-buyer market (issue 17: an LLM buyer's overshoots must be counted).

A forced local model (exact texts: a valid call, none, the wrong tool, a price not a number, a negative price, an
accept above the budget) and a tiny random model built from a config play as buyers through the real episode, every
answer accounted as the episode accounts it; the OpenAI and Anthropic buyers over real HTTP against the local servers
of ``tests/servers.py`` (native tool calls, hostile ones bad parses; whole markets through the game, the key never
in a record or in printed output). A buyer's prompts hold its own budget and thread only. Scripted buyers never
overshoot; a buyer accepting above its budget is counted.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from game_helpers import APIS, FAST, KEY_ENV, check_failed_request, check_key_kept, save_tiny_base
from servers import ChatReply, ChatRequest, ChatServer, Fault, tool_responder
from test_game_bilateral_agents import QWEN_STYLE_TEMPLATE

from negolib.agents.base import AgentReply
from negolib.agents.hf_agent import PromptTruncationWarning
from negolib.core.chat_template import encode_text
from negolib.core.sampling import SamplingConfig
from negolib.core.secrets import MissingKeyError
from negolib.games.multi_buyer import MultiBuyerGame
from negolib.games.multi_buyer import buyer_prompts as bp
from negolib.games.multi_buyer.agents import LMOptions
from negolib.games.multi_buyer.buyers import ScriptedBuyers
from negolib.games.multi_buyer.env import Episode
from negolib.games.multi_buyer.lm_buyers import (
    NO_BUYER_CALL_ERROR,
    AnthropicBuyer,
    BuyerAgents,
    HFBuyer,
    MixedPool,
    OpenAIBuyer,
)
from negolib.games.multi_buyer.scenarios import MarketConfig, make_scenario
from negolib.games.multi_buyer.sellers import SELLERS, make_seller
from negolib.games.multi_buyer.tools import anthropic_tools, buyer_tools
from negolib.games.toolcalls import CLOSE_TAG, OPEN_TAG, StructuredTurn, ToolCall, money, reply_turn
from negolib.models import tiny_causal_lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTINEL = "sk-test-SENTINEL-buy3rs-5e2a81c9f0"
SC = make_scenario(MarketConfig(n_buyers=3, turn_budget=7), 5_000_000, "t")
OVER = round(SC.budgets[0] * 1.5, 2)  # an offer above buyer_1's budget


def tc(name: str, args: dict[str, Any] | None = None) -> str:
    """A Hermes-style call as a model writes it."""
    return f"{OPEN_TAG}\n{json.dumps({'name': name, 'arguments': args or {}})}\n{CLOSE_TAG}"


def seller_call(to: str, offer: float | None = None, message: str = "") -> StructuredTurn:
    args: dict[str, Any] = {"to": to} if offer is None else {"to": to, "offer": offer}
    return StructuredTurn(message or f"Hello {to}.", [ToolCall("message_buyer", args)])


class ForcedBuyer(HFBuyer):
    """The local buyer with a deterministic generator: the prompt whose last user message is the seller's k-th
    message gets ``script[k]``; the prompts it saw are kept as text."""

    def __init__(self, *args: Any, script: dict[int, str], **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.script, self.prompts = script, []

    def generate_ids(self, prompts, seed):
        comps = []
        for p in prompts:
            text = self.tokenizer.decode(list(p))
            self.prompts.append(text)
            k = int(re.findall(r"Message (\d+) from the seller", text)[-1])
            comps.append(encode_text(self.tokenizer, self.script[k]) + [self.tags.stop_ids[0]])
        return comps, [[0.0] * len(c) for c in comps], [True] * len(comps)


def tiny(template: str | None = None) -> tuple[Any, Any]:
    model, tok = tiny_causal_lm(seed=0)
    if template is not None:
        tok.chat_template = template
    return model, tok


# -- the buyer's chat: its own budget and thread only ------------------------------------------------------------
def test_a_buyers_chat_holds_its_budget_and_its_own_thread_only():
    ep = Episode(SC)
    ep.step(seller_call("buyer_1", 90.0, "secret-to-buyer_1"))
    ep.step(StructuredTurn("secret-of-buyer_1", [ToolCall("counter_offer", {"price": 40.0})]))
    ep.step(seller_call("buyer_2", 95.0, "secret-to-buyer_2"))
    ep.step(StructuredTurn("secret-of-buyer_2", [ToolCall("decline", {})]))
    ep.step(seller_call("buyer_1", 80.0, "again-to-buyer_1"))
    view = ep.view()
    assert view.buyer == 0 and view.offer == 80.0
    for fmt in ("native", "text"):
        chat = bp.chat_messages(view, fmt)
        text = json.dumps(chat)
        assert "secret-to-buyer_1" in text and "secret-of-buyer_1" in text and "again-to-buyer_1" in text
        assert "buyer_2" not in text and "95.00" not in text  # nothing of buyer_2's thread
        assert f"Your budget is {money(SC.budgets[0])}" in chat[0]["content"]
        assert all(money(b) not in text for b in SC.budgets[1:]) and money(SC.cost) not in text
        assert chat[-1]["content"].endswith(
            'Message 2 from the seller.\nThe seller writes to you: "again-to-buyer_1"\nThe seller makes a binding '
            "offer: $80.00. You may accept it with accept_offer().\nAnswer with one call.")
        assert "Seller turn" not in text and "call_turn" not in text  # no count of the seller's other turns
    native, textual = bp.chat_messages(view), bp.chat_messages(view, "text")
    assert native[2]["tool_calls"][0]["function"] == {"name": "counter_offer", "arguments": {"price": 40.0}}
    assert native[3]["role"] == "tool" and "$40.00 was sent" in native[3]["content"]
    assert "<tools>" in textual[0]["content"] and "<tools>" not in native[0]["content"]
    assert textual[2]["content"] == "secret-of-buyer_1\n" + tc("counter_offer", {"price": 40.0})
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in textual)
    assert len(bp.chat_messages(view, drop=1)) == 2 and "Message 2" in bp.chat_messages(view, drop=1)[1]["content"]
    with pytest.raises(ValueError, match="tool_format"):
        bp.chat_messages(view, "json")  # type: ignore[arg-type]


# -- a forced local model: hostile answers are bad parses, an accept above the budget an overshoot -----------------
SCRIPT = {
    1: "Let me think about it.",  # no tool call
    2: "Here. " + tc("message_buyer", {"to": "buyer_1"}),  # the wrong tool (the seller's)
    3: "I pay this. " + tc("counter_offer", {"price": "forty"}),  # price not a number
    4: "Pay me instead. " + tc("counter_offer", {"price": -5}),  # negative price
    5: "My offer. " + tc("counter_offer", {"price": 10.5}),  # valid
    6: "Deal! " + tc("accept_offer"),  # accepts an offer above its budget
}


@pytest.mark.parametrize("template", [QWEN_STYLE_TEMPLATE, None], ids=["native", "text"])
def test_forced_buyer_answers_are_parsed_strictly_and_counted_like_the_episode(template):
    model, tok = tiny(template)
    buyer = ForcedBuyer(model, tok, SamplingConfig(max_new_tokens=8), name="forced@buyer", prompt_cap=8192,
                        script=SCRIPT)
    assert buyer.tool_format == ("native" if template else "text")
    ep = Episode(SC)
    for k in range(1, 7):
        ep.step(seller_call("buyer_1", OVER if k == 6 else None))
        (rep,) = buyer.act_batch([ep.view()])
        rec = ep.step(reply_turn(rep))
        assert rec["raw"] == SCRIPT[k]
        if k > 1:
            assert rep.extra["parse_error"] == rec["parse_error"]
    assert ep.done
    rec = ep.record()
    buyers = [t for t in rec["turns"] if t["role"] == "buyer"]
    errors = [t["parse_error"] for t in buyers]
    assert errors[0] is None and buyers[0]["action"] is None  # the episode: a decline in words
    assert "unknown tool 'message_buyer'" in errors[1] and "price must be a number" in errors[2]
    assert "price must be positive" in errors[3] and errors[4] is None and errors[5] is None
    assert buyers[4]["action"] == {"name": "counter_offer", "arguments": {"price": 10.5}}
    out = rec["outcome"]
    assert out["buyer_bad_parses"] == 3 and out["buyer_prose_only"] == 1 and out["buyer_turns"] == 6
    assert out["overshoots"] == 1 and out["deals"] == [{"buyer": 0, "price": OVER, "turn": 6, "overshoot": True}]
    st = buyer.tool_stats
    assert (st.turns, st.calls, st.bad_parses, st.no_calls, st.overshoots) == (6, 2, 4, 1, 1)
    assert st.bad_parses == out["buyer_bad_parses"] + out["buyer_prose_only"]
    assert rep.extra["parse_error"] is None
    prompt = buyer.prompts[-1]  # the sixth message: the whole history of buyer_1
    assert f"Your budget is {money(SC.budgets[0])}" in prompt and f"binding offer: {money(OVER)}" in prompt
    assert all(money(b) not in prompt for b in SC.budgets[1:])
    if template:
        assert "# Tools" in prompt and "Your counter of $10.50 was sent to the seller." in prompt
    else:
        assert "<tools>" in prompt and "Result of your counter_offer call: Your counter of $10.50" in prompt


def test_forced_buyer_no_call_error_and_invalid_accept():
    model, tok = tiny()
    buyer = ForcedBuyer(model, tok, SamplingConfig(max_new_tokens=8), prompt_cap=8192,
                        script={1: "Hmm.", 2: tc("accept_offer")})
    ep = Episode(SC)
    ep.step(seller_call("buyer_2"))
    (rep,) = buyer.act_batch([ep.view()])
    assert rep.extra["parse_error"] == NO_BUYER_CALL_ERROR
    ep.step(reply_turn(rep))
    ep.step(seller_call("buyer_2"))  # no offer: an accept is invalid
    (rep,) = buyer.act_batch([ep.view()])
    assert ep.step(reply_turn(rep))["invalid_accept"] and rep.extra["parse_error"].startswith("invalid accept_offer")
    assert buyer.tool_stats.invalid_accepts == 1 and buyer.tool_stats.bad_parses == 2


def test_the_prompt_cap_drops_a_buyers_oldest_answers_first():
    model, tok = tiny()
    buyer = ForcedBuyer(model, tok, SamplingConfig(max_new_tokens=8), script={3: tc("decline")})
    ep = Episode(SC)
    for k in range(2):
        ep.step(seller_call("buyer_3", 50.0 + k))
        ep.step(StructuredTurn(f"answer-{k}", [ToolCall("counter_offer", {"price": 10.0 + k})]))
    ep.step(seller_call("buyer_3", 70.0))
    view = ep.view()
    sizes = [len(encode_text(tok, buyer.render(view, d))) for d in (0, 1, 2)]
    assert sizes[0] > sizes[1] > sizes[2]
    buyer.prompt_cap = sizes[1]
    with pytest.warns(PromptTruncationWarning, match="dropped the 1 oldest of its 2 own past turns"):
        (rep,) = buyer.act_batch([view])
    assert rep.extra["history_dropped"] == 1 and "answer-0" not in buyer.prompts[-1] and "answer-1" in buyer.prompts[-1]
    assert buyer.tool_stats.prompts_capped == 1 and rep.extra["parse_error"] is None


# -- a tiny random model built from a config, by name, through the game ------------------------------------------
@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return save_tiny_base(tmp_path_factory)


def test_a_tiny_model_buyer_plays_whole_markets_through_the_game_and_every_answer_is_accounted(tiny_path):
    game = MultiBuyerGame(["base"], lm=LMOptions(sampling=SamplingConfig(max_new_tokens=8), max_batch=4,
                                                 prompt_cap=8192))
    scs = [make_scenario(MarketConfig(n_buyers=3, turn_budget=4), 5_000_000 + i, "t") for i in range(2)]
    name = f"probe_all+hf:{tiny_path}"

    def run(seed: int) -> tuple[Any, list[dict[str, Any]]]:
        buyer = game.make_agent(name, "buyer", seed)
        return buyer, game.play(game.make_agent(name, "seller", seed), buyer, scs, seed)

    buyer, recs = run(0)
    assert isinstance(buyer, HFBuyer) and buyer.name == f"hf:{tiny_path}@buyer"
    assert buyer.settings()["game"] == "multi_buyer" and buyer.tool_format == "text"
    assert all(r["status"] in ("deal", "no_deal") for r in recs), [r.get("error") for r in recs]
    outs = [r["outcome"] for r in recs]
    st = buyer.tool_stats
    assert st.turns == sum(o["buyer_turns"] for o in outs) >= 2
    assert st.bad_parses == sum(o["buyer_bad_parses"] + o["buyer_prose_only"] for o in outs)
    assert st.no_calls == sum(o["buyer_prose_only"] for o in outs)
    assert st.overshoots == sum(o["overshoots"] for o in outs)
    assert buyer.stats.calls >= 1 and buyer.stats.decode_tokens > 0
    assert game.make_agent(name, "buyer", 1).model is buyer.model  # weights loaded once per game
    _, again = run(0)
    assert [t["raw"] for r in again for t in r["turns"]] == [t["raw"] for r in recs for t in r["turns"]]


def test_buyer_agents_by_name_and_roles(tiny_path, monkeypatch):
    game = MultiBuyerGame(["base"])
    path = f"hf:{tiny_path}"
    assert game.make_agent(path, "buyer", 0).name == "pool@buyer"  # a bare name still reads as the pool
    assert game.make_agent(f"greedy+{path}", "seller", 0).name == "greedy@seller"
    with pytest.raises(ValueError, match="play a buyer"):
        BuyerAgents().make(path, "seller", 0)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKeyError, match="OPENAI_API_KEY is not set"):
        game.make_agent("greedy+openai:gpt-test", "buyer", 0)
    monkeypatch.setenv("ANTHROPIC_API_KEY", SENTINEL)
    claude = game.make_agent("greedy+anthropic:claude-test", "buyer", 0)
    assert isinstance(claude, AnthropicBuyer) and claude.name == "anthropic:claude-test@buyer"
    assert SENTINEL not in json.dumps(claude.settings()) and SENTINEL not in repr(claude)


def test_a_mixed_pool_sends_each_buyers_views_to_its_agent():
    model, tok = tiny()
    lm = ForcedBuyer(model, tok, SamplingConfig(max_new_tokens=8), name="forced@buyer", prompt_cap=8192,
                     script={k: "Sure. " + tc("counter_offer", {"price": 1.25}) for k in range(1, 9)})
    pool = MixedPool(lm, ScriptedBuyers(), [1])
    (rec,) = MultiBuyerGame().play(make_seller("probe_all", 0), pool, [SC], 0)
    answers = [t for t in rec["turns"] if t["role"] == "buyer"]
    assert {t["buyer"] for t in answers} == {0, 1, 2}
    for t in answers:
        assert (t["raw"] == "Sure. " + tc("counter_offer", {"price": 1.25})) is (t["buyer"] == 1)
    assert pool.settings()["lm_buyers"] == [1] and lm.tool_stats.turns == sum(t["buyer"] == 1 for t in answers)


# -- overshoots: impossible for scripted buyers, counted for a language-model buyer -------------------------------
class OverOffers:
    """A seller offering each buyer in turn 1.2 times its budget (it reads the scenario: a test stub)."""

    name = "over@seller"

    def act_batch(self, views):
        out = []
        for v in views:
            k = (v.turn - 1) % v.n_buyers
            while v.bought[k]:
                k = (k + 1) % v.n_buyers
            budget = SCS_BY_ID[v.episode_id].budgets[k]
            out.append(AgentReply("Take it.", extra={"tool_calls": [
                {"name": "message_buyer", "arguments": {"to": f"buyer_{k + 1}", "offer": round(budget * 1.2, 2)}}]}))
        return out


class AcceptsAll:
    """A stub buyer accepting every offer (and countering when there is none)."""

    name = "yes@buyer"

    def act_batch(self, views):
        return [AgentReply("Yes.", extra={"tool_calls": [
            {"name": "accept_offer", "arguments": {}} if v.offer is not None else
            {"name": "counter_offer", "arguments": {"price": 1.0}}]}) for v in views]


SCS = [make_scenario(MarketConfig(n_buyers=4, n_items=2, turn_budget=8), 5_000_100 + i, "t") for i in range(4)]
SCS_BY_ID = {f"{sc.key}|{i}": sc for i, sc in enumerate(SCS)}


def test_an_accept_above_the_budget_is_counted_and_scripted_buyers_never_overshoot():
    game = MultiBuyerGame(["base"])
    for rec in game.play(OverOffers(), AcceptsAll(), SCS, 0):
        out = rec["outcome"]
        assert out["overshoots"] == len(out["deals"]) == 2 and all(d["overshoot"] for d in out["deals"])
    for rec in game.play(OverOffers(), ScriptedBuyers(), SCS, 0):
        assert rec["outcome"]["overshoots"] == 0 and not rec["outcome"]["deals"]
    scenarios = game.tournament_scenarios(2)
    for seller in SELLERS:
        for style in (None, "eager", "quiet", "splitter"):
            for rec in game.play(make_seller(seller, 0), ScriptedBuyers(style=style), scenarios, 0):
                assert rec["status"] != "error" and rec["outcome"]["overshoots"] == 0
                assert all(d["price"] <= rec["budgets"][d["buyer"]] for d in rec["outcome"]["deals"])


# -- API buyers over real HTTP -----------------------------------------------------------------------------------
@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SENTINEL)
    return SENTINEL


def at_buyer_1_second_message() -> Episode:
    """buyer_1 to answer the seller's second message to it (an offer of $60), after buyer_2 was asked too."""
    ep = Episode(SC)
    ep.step(seller_call("buyer_1", None, "First to buyer_1."))
    ep.step(StructuredTurn("I could pay 30.", [ToolCall("counter_offer", {"price": 30.0})]))
    ep.step(seller_call("buyer_2", 77.0, "private-to-buyer_2"))
    ep.step(StructuredTurn("private-of-buyer_2", [ToolCall("decline", {})]))
    ep.step(seller_call("buyer_1", 60.0, "Second to buyer_1."))
    return ep


ACCEPT = {"name": "accept_offer", "arguments": {}}
CASES = {  # case: (text, calls, expected action, expected error fragment)
    "accept": ("Deal.", [ACCEPT], ACCEPT, None),
    "counter": ("Maybe 45?", [{"name": "counter_offer", "arguments": {"price": 45}}],
                {"name": "counter_offer", "arguments": {"price": 45.0}}, None),
    "no_call": ("I need to think.", [], None, NO_BUYER_CALL_ERROR),
    "wrong_tool": ("Here.", [{"name": "message_buyer", "arguments": {"to": "buyer_1"}}], None, "unknown tool"),
    "price_not_a_number": ("45.", [{"name": "counter_offer", "arguments": {"price": "45"}}], None,
                           "price must be a number"),
    "price_negative": ("Pay me.", [{"name": "counter_offer", "arguments": {"price": -45}}], None,
                       "price must be positive"),
    "malformed": ("Here.", [{"name": "counter_offer", "arguments": '{"price": 45'}], None, "malformed JSON"),
    "double": ("Both.", [ACCEPT, {"name": "decline", "arguments": {}}], None, "double tool call"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("api", APIS)
def test_api_buyer_native_tool_calls_over_real_http(api, case, api_key):
    text, calls, action, error = CASES[case]
    ep = at_buyer_1_second_message()
    cls = OpenAIBuyer if api == "openai" else AnthropicBuyer
    with ChatServer(api, responder=tool_responder(text, calls)) as srv:
        buyer = cls("buyer", "test-model", api_key_env=KEY_ENV, base_url=srv.base_url, retry=FAST)
        (rep,) = buyer.act_batch([ep.view()])
    assert rep.error is None and rep.text == text and len(rep.extra["tool_calls"]) == len(calls)
    json.dumps(rep.extra["tool_calls"])  # plain data, not SDK objects
    body = srv.stats.bodies[0]
    assert body["tools"] == (buyer_tools() if api == "openai" else anthropic_tools(buyer_tools()))
    sent = json.dumps(body)
    assert "private-" not in sent and "77.00" not in sent and "buyer_2" not in sent  # its own thread only
    assert f"Your budget is {money(SC.budgets[0])}" in sent and SENTINEL not in sent
    if api == "openai":  # its first answer went back as a native call, with its result
        assert body["messages"][2]["tool_calls"][0]["function"] == {"name": "counter_offer",
                                                                    "arguments": '{"price": 30.0}'}
        assert body["messages"][3]["role"] == "tool" and "$30.00 was sent" in body["messages"][3]["content"]
    else:
        use = body["messages"][1]["content"][-1]
        assert use["type"] == "tool_use" and use["input"] == {"price": 30.0}
        assert body["messages"][2]["content"][0]["tool_use_id"] == use["id"]
    rec = ep.step(reply_turn(rep))
    assert rec["action"] == action
    if error is None:
        assert rec["parse_error"] is None and rep.extra["parse_error"] is None
    elif case == "no_call":
        assert rec["parse_error"] is None and rep.extra["parse_error"] == NO_BUYER_CALL_ERROR  # stricter here
    else:
        assert error in rec["parse_error"] and rep.extra["parse_error"] == rec["parse_error"]
    st = buyer.tool_stats
    assert (st.calls, st.bad_parses, st.no_calls, st.double_calls) == (
        int(error is None), int(error is not None), int(case == "no_call"), int(case == "double"))
    assert st.overshoots == int(case == "accept" and 60.0 > SC.budgets[0])


def buyer_bot(req: ChatRequest) -> ChatReply:
    """An API buyer: accepts an offer within its budget, else counters at half its budget."""
    budget = float(re.search(r"Your budget is \$([\d,]+\.\d\d)", req.messages[0]["content"])[1].replace(",", ""))
    offer = re.findall(r"binding offer: \$([\d,]+\.\d\d)", req.messages[-1]["content"])
    if offer and float(offer[-1].replace(",", "")) <= budget:
        return ChatReply("Deal.", 50, 4, tool_calls=[ACCEPT])
    return ChatReply("Too much for me.", 50, 6, tool_calls=[
        {"name": "counter_offer", "arguments": {"price": round(budget / 2, 2)}}])


@pytest.mark.parametrize("api", APIS)
def test_an_api_buyer_plays_whole_markets_through_the_game_with_the_key_kept(api, monkeypatch, capsys, tmp_path):
    game = MultiBuyerGame(["base"], lm=LMOptions(retry=FAST))
    scenarios = game.tournament_scenarios(3)
    prefix = "OPENAI" if api == "openai" else "ANTHROPIC"
    monkeypatch.setenv(f"{prefix}_API_KEY", SENTINEL)
    failing = f"Your budget is {money(scenarios[2].budgets[0])}"  # buyer_1 of the third market meets a 401
    with ChatServer(api, responder=buyer_bot, faults=[Fault("401", count=None, match=failing)]) as srv:
        monkeypatch.setenv(f"{prefix}_BASE_URL", srv.base_url)
        buyer = game.make_agent(f"probe_all+{api}:test-model", "buyer", 0)
        assert isinstance(buyer, OpenAIBuyer if api == "openai" else AnthropicBuyer)
        records = game.play(game.make_agent("probe_all", "seller", 0), buyer, scenarios, 0)
    print(records, buyer.settings(), repr(buyer), vars(buyer))
    check_failed_request(game, records[2])
    for rec in records[:2]:
        out = rec["outcome"]
        assert rec["status"] in ("deal", "no_deal") and game.payoffs(rec).valid
        assert out["buyer_bad_parses"] == 0 and out["buyer_turns"] >= 1 and out["overshoots"] == 0
        assert all(t["raw_tool_calls"] for t in rec["turns"] if t["role"] == "buyer")
    assert buyer.tool_stats.failed == 1 and buyer.tool_stats.bad_parses == 0
    assert all(body["tools"] for body in srv.stats.bodies)
    check_key_kept(SENTINEL, srv, records, buyer, capsys, tmp_path, "status")


def test_a_tournament_puts_a_language_model_buyer_in_the_round_robin(tiny_path, tmp_path):
    from negolib.tournament import run_tournament

    game = MultiBuyerGame(["base"], lm=LMOptions(sampling=SamplingConfig(max_new_tokens=8), prompt_cap=8192))
    agents = ["greedy", f"probe_all+hf:{tiny_path}"]
    res = run_tournament(game, agents, 1, tmp_path / "t", progress=False)
    assert res.played == 4 and res.n_errors == 0
    lines = [json.loads(x) for x in (tmp_path / "t" / "matches.jsonl").read_text().splitlines() if x.strip()]
    assert {r["buyer"] for r in lines} == set(agents)
    for line in lines:  # the language-model buyer answers in text, the scripted pool with structured calls
        rec, lm = line["record"], line["buyer"] == agents[1]
        assert rec["buyer"] == (f"hf:{tiny_path}@buyer" if lm else "pool@buyer")
        answers = [t for t in rec["turns"] if t["role"] == "buyer"]
        assert answers and all((t["raw_tool_calls"] is None) is lm for t in answers)
