"""TRL's ``environment_factory`` over every game (issue 30, section 1): tool schemas, dataset splits, and a scripted
seller's moves replayed through the tools scoring bit for bit what the project's own rollout scores."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from negolib.envs.trl import OVER, ROW_PROMPT, dataset, environment_factory, scenario_keys, tool_schemas  # noqa: E402
from negolib.envs.trl_games import binding  # noqa: E402
from negolib.games import get_game  # noqa: E402
from negolib.training.data import ScenarioItem  # noqa: E402

TOOLS = {"multi_issue": {"counter", "accept"}, "bilateral": {"make_offer", "accept_offer", "walk_away"},
         "multi_buyer": {"message_buyer"}, "multi_product": {"make_offer"}}
# (opponent, scripted sellers replayed, options matching the game's own Game.play environment)
REPLAY = {"multi_issue": ("boulware", ("linear", "conceder", "hardliner"), {"accept_applies_terms": False}),
          "bilateral": ("conceder", ("linear", "boulware", "fixed_price"), {}),
          "multi_buyer": ("pool", ("greedy", "probe_all", "auctioneer"), {}),
          "multi_product": ("pool", ("greedy", "random"), {})}


def tool_call(game: str, reply: Any) -> tuple[str, dict[str, Any]]:
    """The tool call (name, arguments) that plays a scripted seller's reply."""
    if game == "multi_issue":
        from negolib.games.multi_issue.protocol import parse_action

        parsed = parse_action(reply.text)
        assert parsed.action is not None, reply.text
        if parsed.action.kind == "ACCEPT":
            return "accept", {"message": parsed.prose}
        return "counter", {"terms": {t.name: t.value for t in parsed.action.terms}, "message": parsed.prose}
    if game == "multi_product":
        from negolib.games.multi_product.protocol import parse_message

        parsed = parse_message(reply.text, 999, 999)
        assert parsed.offer is not None, reply.text
        return "make_offer", {**parsed.offer.to_dict(), "message": parsed.message}
    (call,) = reply.extra["tool_calls"]
    return call["name"], {**call["arguments"], "message": reply.text}


def own_reward(game: str, options: dict[str, Any], key: str, record: dict[str, Any]) -> float:
    """The reward the project's own training path gives a record (the game's training adapter's outcome)."""
    bound = binding(game)
    factory, _ = bound.episodes("seller", options)
    stratum, _, seed = key.rpartition("|")
    episode = factory(ScenarioItem(bound.make(stratum, int(seed)), "x", key=key), "own")
    if hasattr(episode, "training_outcome"):
        return float(episode.training_outcome(record).reward)
    return float(record["outcome"]["reward"])  # the paper's episode: Eq. 1 in its record


def replay(env: Any, game: str, seller: Any, row: dict[str, Any], nudge: float = 0.0) -> list[str]:
    """Play ``seller``'s moves through ``env``'s tools (``nudge``: added to every price, the sabotaged twin)."""
    seen = [env.reset(**row)]
    while not env.episode.done:
        name, args = tool_call(game, seller.act(env.episode.view("seller")))
        if nudge and "price" in args:
            args["price"] = round(args["price"] + nudge, 2)
        seen.append(getattr(env, name)(**args))
    return seen


@pytest.mark.parametrize("game", sorted(TOOLS))
def test_tool_schemas_pass_transformers_get_json_schema(game):
    env = environment_factory(game, REPLAY[game][0])
    schemas = tool_schemas(env)
    assert {s["function"]["name"] for s in schemas} == TOOLS[game]
    for s in schemas:
        params = s["function"]["parameters"]
        assert s["function"]["description"] and "message" in params["required"]
        assert all(p.get("description") for p in params["properties"].values())
    public = {n for n in dir(env) if not n.startswith("_") and callable(getattr(env, n)) and not isinstance(
        getattr(env, n), type)}
    assert public == TOOLS[game] | {"reset", "get_reward"}  # TRL exposes every other public method as a tool


@pytest.mark.parametrize("game", sorted(TOOLS))
def test_dataset_rows_are_chat_prompts_and_the_splits_are_disjoint(game):
    rows = dataset(game, 6, "train")
    assert len(rows) == 6 and rows[0]["prompt"] == list(ROW_PROMPT) and rows[0]["game"] == game
    keys = {s: set(scenario_keys(game, 40, s)) for s in ("train", "validation", "test")}
    assert all(len(k) == 40 for k in keys.values())
    assert not keys["train"] & keys["validation"] and not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    with pytest.raises(ValueError, match="split"):
        scenario_keys(game, 3, "dev")


def test_held_out_domain_appears_only_in_the_test_split():
    strata = lambda split: {k.rpartition("|")[0] for k in scenario_keys("multi_issue", 90, split)}  # noqa: E731
    assert "car" in strata("test") and "car" not in strata("train") | strata("validation")


@pytest.mark.parametrize("game", sorted(TOOLS))
def test_scripted_moves_replayed_through_the_tools_score_as_the_projects_own_rollout(game):
    opponent, sellers, options = REPLAY[game]
    g = get_game(game)
    env_cls = environment_factory(game, opponent, seed=3, **options)
    rows = list(dataset(game, 4, "test"))
    scenarios = [binding(game).make(*(lambda s, _, n: (s, int(n)))(*r["scenario_key"].rpartition("|"))) for r in rows]
    env = env_cls()  # one instance, reset for every episode, as TRL reuses its pool
    for name in sellers:
        records = g.play(g.make_agent(name, "seller", 3), g.make_agent(opponent, "buyer", 3), scenarios, seed=3)
        for row, rec in zip(rows, records):
            seen = replay(env, game, g.make_agent(name, "seller", 3), row)
            assert seen[-1].startswith(OVER) and env.episode.done
            assert env.get_reward() == own_reward(game, options, row["scenario_key"], rec), (name, row)
            assert g.payoffs(env.record) == g.payoffs(rec)
            assert getattr(env, sorted(TOOLS[game])[0])(**_any_args(game)).startswith(OVER)  # after the end: no-op
            assert env.get_reward() == own_reward(game, options, row["scenario_key"], rec)


def _any_args(game: str) -> dict[str, Any]:
    return {"multi_issue": {"message": "ok"}, "bilateral": {"message": "ok"},
            "multi_buyer": {"to": "buyer_1", "message": "ok"},
            "multi_product": {"to": "buyer_1", "product": "product_1", "price": 1.0, "message": "ok"}}[game]


def test_a_nudged_replay_scores_differently():
    """The positive control: one cent more on every bilateral offer changes the reward the equality above checks."""
    g = get_game("bilateral")
    env = environment_factory("bilateral", "conceder", seed=3)()
    rows = list(dataset("bilateral", 5, "test"))
    exact, nudged = [], []
    for row in rows:
        replay(env, "bilateral", g.make_agent("linear", "seller", 3), row)
        exact.append(env.get_reward())
        replay(env, "bilateral", g.make_agent("linear", "seller", 3), row, nudge=0.01)
        nudged.append(env.get_reward())
    assert exact != nudged


def test_an_unfinished_episode_gets_the_floor_and_a_bad_turn_costs_a_turn():
    env = environment_factory("multi_issue", "hardliner")()
    env.reset(**dataset("multi_issue", 1)[0])
    assert env.get_reward() == env.episode.no_deal_floor == -0.3
    seen = env.counter({"no_such_term": 1}, "Hello")  # off-schema: parsed, changes nothing; the buyer answers
    assert not seen.startswith(OVER) and len(env.episode.turns) == 2
    seen = env.accept("I accept.")  # the hardliner countered: a valid accept closes the deal
    assert seen.startswith(OVER + ": a deal") and math.isfinite(env.get_reward())


def test_factory_rejects_what_trl_would_only_find_later():
    with pytest.raises(KeyError, match="no TRL binding"):
        environment_factory("chess", "x")
    with pytest.raises(ValueError, match="policy plays"):
        environment_factory("multi_buyer", "pool", role="buyer")
    with pytest.raises(TypeError, match="unknown options"):
        environment_factory("bilateral", "conceder", max_round=3)
    with pytest.raises(ValueError):
        environment_factory("bilateral", "no_such_agent")
    env = environment_factory("bilateral", "conceder")()
    with pytest.raises(ValueError, match="row given"):
        env.reset(**dataset("multi_buyer", 1)[0])


def test_an_opponent_failure_ends_the_episode_with_no_reward():
    class Broken:
        name = "broken"

        def act_batch(self, views):
            raise RuntimeError("opponent down")

    env = environment_factory("bilateral", "conceder")()
    env.reset(**dataset("bilateral", 1)[0])
    env._opponent = Broken()
    seen = env.make_offer(50.0, "Fifty.")
    assert seen.startswith(OVER) and "opponent down" in seen
    assert math.isnan(env.get_reward()) and env.record["status"] == "error"
