"""PettingZoo and Gymnasium adapters of every game (:mod:`negolib.envs.pettingzoo`, :mod:`negolib.envs.gymnasium`):
PettingZoo's ``api_test`` and ``seed_test``, Gymnasium's ``check_env``, the ``negobook/<Game>-v0`` ids, and two
scripted agents stepped through the AEC loop giving the same records as ``Game.play``."""

from __future__ import annotations

import json
import warnings

import pytest

pytest.importorskip("gymnasium")
pytest.importorskip("pettingzoo")

import gymnasium  # noqa: E402
from game_helpers import text_agents  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402
from pettingzoo.test import api_test, seed_test  # noqa: E402

import negolib.envs  # noqa: E402,F401 - registers the gymnasium ids
from negolib.envs import GYM_IDS  # noqa: E402
from negolib.envs import gymnasium as gym_envs  # noqa: E402
from negolib.envs import pettingzoo as pz_envs  # noqa: E402
from negolib.envs.core import TextEpisode, game_kit  # noqa: E402

GAMES = ("multi_issue", "bilateral", "multi_buyer", "multi_product")


@pytest.mark.parametrize("game", GAMES)
def test_pettingzoo_api_and_seed_tests_pass(game: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # api_test's advice (numbered agent names, Box spaces) does not apply
        api_test(pz_envs.env(game), num_cycles=60)
        seed_test(lambda: pz_envs.env(game), num_cycles=60)


def test_a_plain_str_observation_fails_api_test() -> None:
    """Why observations are TextObservation: api_test compares an observation's dtype with its space's."""

    class PlainText(pz_envs.NegotiationAEC):
        def observe(self, agent: str) -> str:
            return str(super().observe(agent))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((AssertionError, AttributeError)):
            api_test(PlainText("bilateral"), num_cycles=5)


@pytest.mark.parametrize("game", GAMES)
def test_aec_loop_of_two_scripted_agents_gives_game_play_records(game: str) -> None:
    kit = game_kit(game)
    for seed in (3, 11):
        aec = pz_envs.env(game)
        aec.reset(seed=seed)
        assert aec.possible_agents == ["seller", "buyer"] and aec.agent_selection == aec.episode.to_move
        seller, buyer = text_agents(game, kit, seed)
        expected = kit.game.play(seller, buyer, [aec.episode.scenario], seed)[0]
        agents = dict(zip(("seller", "buyer"), text_agents(game, kit, seed)))
        rewards = {a: 0.0 for a in aec.possible_agents}
        for agent in aec.agent_iter():
            obs, reward, terminated, truncated, _ = aec.last()
            rewards[agent] += reward
            assert isinstance(obs, str) and not truncated
            aec.step(None if terminated else agents[agent].act(aec.view(agent)).text)
        extra = {k: expected[k] for k in set(expected) - set(aec.record())}
        got = aec.record(**extra)
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
        payoffs = kit.game.payoffs(expected)
        assert rewards == {"seller": payoffs.seller, "buyer": payoffs.buyer}
        assert len(expected["turns"]) >= 2


@pytest.mark.parametrize("game", GAMES)
def test_gymnasium_check_env_passes_and_ids_are_registered(game: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(gym_envs.env(game))
    made = gymnasium.make(GYM_IDS[game], role="seller")
    assert made.unwrapped.kit.name == game
    obs, info = made.reset(seed=5)
    assert isinstance(obs, str) and "seller" in obs and info["seed"] == 5
    made.close()


@pytest.mark.parametrize("game", GAMES)
def test_gymnasium_episode_reward_is_the_in_process_reward(game: str) -> None:
    """The scripted seller steps the gym env from its view; its final reward is the training reward in process."""
    kit = game_kit(game)
    seller, _ = text_agents(game, kit, 7)
    env = gym_envs.env(game, opponent=gym_envs.default_opponent(game, "buyer"))
    obs, info = env.reset(seed=7)
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, done, truncated, info = env.step(seller.act(env.episode.view("seller")).text)
        total, steps = total + reward, steps + 1
        assert not truncated and (done or reward == 0.0)
    ref = TextEpisode(kit, info["domain"], 7)
    agents = {"seller": text_agents(game, kit, 7)[0], "buyer": kit.game.make_agent(env.opponent, "buyer", 7)}
    while not ref.done:
        ref.play_agent(agents[ref.to_move])
    assert steps >= 1 and total == ref.reward() and info["payoff"] == ref.payoff("seller")
    assert obs.endswith(ref.closing("seller")) and "negotiation is over" in obs


def test_gymnasium_bad_turns_are_contained_and_options_are_checked() -> None:
    env = gym_envs.env("bilateral", role="buyer", opponent="linear", deadline_turns=6)
    obs, info = env.reset(seed=2, options={"domain": "10k"})
    assert info["domain"] == "10k" and info["turn"] == 1  # the seller opened
    for hostile in ("", "\x00" * 50, '<tool_call>{"name": "accept_offer", "arguments": {"x": 1}}</tool_call>',
                    "ACCEPT " * 2000):
        if env.episode.done:
            break
        obs, reward, done, _, info = env.step(hostile)
    assert info["bad_turns"] >= 1 and env.episode.error is None
    with pytest.raises(ValueError, match="domain"):
        env.reset(seed=1, options={"domain": "nowhere"})
    with pytest.raises(ValueError, match="options"):
        gym_envs.env("multi_buyer", turn_budget=3)
    with pytest.raises(ValueError, match="no agent"):
        gym_envs.env("bilateral", opponent="nobody")


def test_the_docs_examples_run() -> None:
    import re
    from pathlib import Path

    doc = Path(__file__).resolve().parent.parent / "docs" / "pettingzoo.md"
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), re.S)
    assert len(blocks) == 2
    for block in blocks:
        exec(compile(block, str(doc), "exec"), {})  # noqa: S102 - the page's own examples
