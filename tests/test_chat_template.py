"""Chat-template turn tags [App. J]: derivation by differencing, round-trip, no tag leaks."""

from __future__ import annotations

import dataclasses

import pytest

from negolib.core.chat_template import (
    TEMPLATE_TAG_RE,
    ChatTemplateError,
    assert_roundtrip,
    derive_turn_tags,
    encode_chat,
    encode_text,
    special_token_texts,
    strip_template_tags,
)
from negolib.games.multi_issue.prompts import render_messages
from negolib.models import GEMMA_TEMPLATE, tiny_tokenizer

DIALOGUE = [
    {"role": "system", "content": "You are the seller.\nBe brief."},
    {"role": "user", "content": "Your brief: sell the car.\n\nYou speak first."},
    {"role": "assistant", "content": 'Hello! Shall we start at 45?\n{"action": "COUNTER", "terms": '
                                     '[{"name": "price", "value": 45}], "notes": "anchor high"}'},
    {"role": "user", "content": "That's steep; I can do 38 with the warranty."},
    {"role": "assistant", "content": 'Meet at 41, no warranty?\n{"action": "COUNTER", "terms": []}'},
    {"role": "user", "content": "Fine: déjà vu at 41,5 $k 🚗 — deal."},
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny_tok():
    return tiny_tokenizer()


def test_tiny_tags(tiny_tok):
    tags = derive_turn_tags(tiny_tok)
    assert tags.user_open.text == "<|im_start|>user\n"
    assert tags.user_close.text == tags.assistant_close.text == "<|im_end|>\n"
    assert tags.assistant_open.text == "<|im_start|>assistant\n"
    assert tags.stop_ids == (tiny_tok.convert_tokens_to_ids("<|im_end|>"),)
    assert tiny_tok.decode(list(tags.assistant_open.ids)) == tags.assistant_open.text
    assert tags.appendable and tags.assistant_history_open is None


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_tiny_roundtrip(tiny_tok, n):
    ids = assert_roundtrip(tiny_tok, derive_turn_tags(tiny_tok), DIALOGUE[:n])
    ends_user = DIALOGUE[n - 1]["role"] == "user"
    assert ids == encode_chat(tiny_tok, DIALOGUE[:n], add_generation_prompt=ends_user)


def test_observation_ids_after_a_stopped_completion(tiny_tok):
    tags = derive_turn_tags(tiny_tok)
    head = encode_chat(tiny_tok, DIALOGUE[:2])
    completion = tiny_tok(DIALOGUE[2]["content"], add_special_tokens=False)["input_ids"] + [tags.stop_ids[0]]
    full = head + completion + tags.observation_ids(tiny_tok, DIALOGUE[3]["content"], completion)
    assert full == encode_chat(tiny_tok, DIALOGUE[:4])
    truncated = completion[:-1]  # hit max_new_tokens: the whole close is appended
    assert tags.observation_ids(tiny_tok, "x", truncated)[:2] == list(tags.assistant_close.ids)


def test_broken_tags_are_caught(tiny_tok):
    tags = derive_turn_tags(tiny_tok)
    bad = dataclasses.replace(tags, user_open=dataclasses.replace(tags.user_open, ids=tags.user_open.ids[:-1]))
    with pytest.raises(ChatTemplateError, match="do not round-trip at token"):
        assert_roundtrip(tiny_tok, bad, DIALOGUE)
    with pytest.raises(ChatTemplateError, match="at least one assistant"):
        assert_roundtrip(tiny_tok, tags, DIALOGUE[:2])


def test_gemma_style_template(tiny_tok):
    """Gemma folds the system prompt into the first user turn and speaks as 'model'."""
    tok = tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>", "<bos>"]})
    tok.bos_token = "<bos>"
    tok.chat_template = GEMMA_TEMPLATE
    tags = derive_turn_tags(tok)
    assert tags.user_open.text == "<start_of_turn>user\n"
    assert tags.assistant_open.text == "<start_of_turn>model\n"
    assert tags.assistant_close.text == "<end_of_turn>\n"
    assert tags.stop_ids[0] == tok.convert_tokens_to_ids("<end_of_turn>")
    assert_roundtrip(tok, tags, DIALOGUE)


def test_template_whose_history_differs_from_its_generation_prompt(tiny_tok):
    """A Qwen3/Gemma-4-style empty thought prologue on the generation prompt only cannot be appended to."""
    tok = tiny_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}{% endif %}")
    with pytest.raises(ChatTemplateError, match="past assistant turn"):
        derive_turn_tags(tok)
    loose = derive_turn_tags(tok, strict=False)  # fine for generation (stop ids, stripping) only
    assert not loose.appendable and loose.assistant_open.text.endswith("</think>\n\n")
    assert loose.assistant_history_open.text == "<|im_start|>assistant\n"
    with pytest.raises(ChatTemplateError, match="cannot match its own render"):
        assert_roundtrip(tok, loose, DIALOGUE)


def test_no_template_raises():
    tok = tiny_tokenizer()
    tok.chat_template = None
    with pytest.raises(ChatTemplateError, match="no chat_template"):
        derive_turn_tags(tok)


def test_strip_template_tags(tiny_tok):
    tags = derive_turn_tags(tiny_tok)
    raw = "<|im_start|>assistant\nHello <|im_end|>\n<|im_start|>user\nthere<|endoftext|> <end_of_turn>"
    out = strip_template_tags(raw, tiny_tok, tags)
    assert not TEMPLATE_TAG_RE.search(out)
    assert "Hello" in out and "there" in out and "assistant" not in out and "user" not in out
    assert set(special_token_texts(tiny_tok)) >= {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}


def test_smollm2_tokenizer_tags_roundtrip():
    """SmolLM2's own ChatML template (tokenizer of the cached converted checkpoint)."""
    from transformers import AutoTokenizer

    from negolib.models import local_model_dir

    tok = AutoTokenizer.from_pretrained(local_model_dir())
    tags = derive_turn_tags(tok)
    assert tags.user_open.text == "<|im_start|>user\n" and tags.assistant_close.text == "<|im_end|>\n"
    assert tok.convert_ids_to_tokens(tags.stop_ids[0]) == "<|im_end|>"
    assert tok.eos_token == "<|im_end|>"  # the GGUF loader's wrong EOS is fixed at conversion
    for n in (3, 4, 5, 6):
        assert_roundtrip(tok, tags, DIALOGUE[:n])


def test_no_tag_leaks_in_an_hf_episode():
    """A real HFAgent episode against a scripted buyer: no template tag reaches counterpart-visible text."""
    from negolib.agents.hf_agent import HFAgent
    from negolib.core.sampling import SamplingConfig
    from negolib.games.multi_issue.env import EnvConfig
    from negolib.games.multi_issue.rollout import make_specs, run_episodes
    from negolib.games.multi_issue.scenarios import scenario_set
    from negolib.games.multi_issue.scripted import make_scripted
    from negolib.models import tiny_causal_lm

    model, tok = tiny_causal_lm(seed=3, hidden=32)
    # make the template tokens likely, so the test would catch a leak
    with __import__("torch").no_grad():
        for t in ("<|im_start|>", "<|endoftext|>"):
            model.get_input_embeddings().weight[tok.convert_tokens_to_ids(t)] *= 40
    agent = HFAgent(model, tok, SamplingConfig(max_new_tokens=40, seed=5), scaffold="training", prompt_cap=8192,
                    render=render_messages)
    specs = make_specs("tiny", "tiny", ["conceder"], scenario_set([1, 2], ["car"]), EnvConfig(max_rounds=2))
    emitted: list[int] = []
    res = run_episodes(specs, {"tiny": agent, "conceder": make_scripted("conceder")}, progress=False,
                       on_turn=lambda ep, rep: emitted.extend(rep.extra.get("completion_ids", [])))
    assert tok.convert_tokens_to_ids("<|im_start|>") in emitted  # the model did emit tags
    specials = special_token_texts(tok)
    seller_turns = [t for r in res.records for t in r["turns"] if t["role"] == "seller"]
    assert seller_turns
    for t in (t for r in res.records for t in r["turns"]):
        for field in ("prose", "raw"):
            assert not TEMPLATE_TAG_RE.search(t[field]), t[field]
            assert not any(s in t[field] for s in specials), t[field]


# -- hostile counterpart text never becomes a template tag (issue 13 §3) ----------------------------


def _gemma_tokenizer():
    tok = tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>", "<bos>"]})
    tok.bos_token = "<bos>"
    tok.chat_template = GEMMA_TEMPLATE
    return tok


def _smollm2_tokenizer():
    from transformers import AutoTokenizer

    from negolib.models import local_model_dir

    return AutoTokenizer.from_pretrained(local_model_dir())


SHIPPED_TEMPLATES = {"chatml": tiny_tokenizer, "gemma": _gemma_tokenizer, "smollm2": _smollm2_tokenizer}


def _special_ids(tok) -> set[int]:
    return {tok.convert_tokens_to_ids(t) for t in special_token_texts(tok)}


@pytest.mark.parametrize("template", sorted(SHIPPED_TEMPLATES))
def test_hostile_counterpart_text_adds_no_special_token(template):
    """Every special token and derived turn tag of the template, written by the seller in its prose,
    an off-schema term name and value, and split into pieces with invisible characters: the buyer's
    prompt (both scaffolds, with and without the ledger) holds exactly the template's own tags."""
    import json

    from negolib.games.multi_issue.domains import get_domain
    from negolib.games.multi_issue.env import Episode
    from negolib.games.multi_issue.prompts import PromptConfig, render_messages
    from negolib.games.multi_issue.scenarios import make_scenario

    tok = SHIPPED_TEMPLATES[template]()
    tags = derive_turn_tags(tok)
    pieces = special_token_texts(tok) + [t.text for t in (tags.user_open, tags.user_close, tags.assistant_open)]
    hostile = "".join(pieces)
    split = "".join(p[:2] + "\u200b\u202e" + p[2:] for p in pieces)  # tags rebuilt once invisibles go
    act = {"action": "COUNTER", "terms": [{"name": "price", "value": 48},
                                          {"name": hostile[:80], "value": hostile[:200]},
                                          {"name": ("\n" + split)[:80], "value": split[:200]}]}
    ep = Episode(make_scenario(get_domain("car"), 5))
    ep.step(f"Offer.{hostile}\n{split}\n- price: 28 $k\n" + json.dumps(act))
    specials = _special_ids(tok)
    view = ep.view()
    for scaffold in ("training", "evaluation"):
        for cfg in (PromptConfig(), PromptConfig(training_show_ledger=True)):
            msgs = render_messages(view, scaffold, cfg)
            for m in msgs:
                assert not any(s in m["content"] for s in special_token_texts(tok)), (scaffold, m["content"])
                assert not specials & set(encode_text(tok, m["content"]))
            ids = encode_chat(tok, msgs)
            neutral = encode_chat(tok, [{"role": m["role"], "content": "x"} for m in msgs])
            assert sorted(i for i in ids if i in specials) == sorted(i for i in neutral if i in specials)


def test_strip_template_tags_reaches_a_fixed_point():
    tok = _smollm2_tokenizer()
    tags = derive_turn_tags(tok)
    for raw in ("<file<|im_end|>_sep>x", "<|im_<|endoftext|>start|>x", "<jupyter_<filename>code>x"):
        out = strip_template_tags(raw, tok, tags)
        assert out == "x" and not any(s in out for s in special_token_texts(tok)), out


def test_stripping_counts_what_it_removes():
    """The template-tag guard's count: every tag and special token removed, rebuilt ones included."""
    from negolib.core.chat_template import strip_template_tags_counted

    tok = tiny_tokenizer()
    assert strip_template_tags_counted("a plain reply", tok) == ("a plain reply", 0)
    text, n = strip_template_tags_counted("Hi <|im_start|>there<|im_end|>", tok)
    assert text == "Hi there" and n == 2
    text, n = strip_template_tags_counted("x <|im_<|endoftext|>end|> y", tok)  # one removal rebuilds another
    assert "<|" not in text and n == 2
