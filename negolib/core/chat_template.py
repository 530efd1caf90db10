"""Chat-template turn tags, derived from the tokenizer itself [paper App. J].

A training rollout keeps token ids, never re-tokenizing decoded text: after the policy's completion
it appends the counterpart's turn raw. For that the environment must emit the template's own turn
tags, so :func:`derive_turn_tags` finds them by differencing renders of a test dialogue with
``apply_chat_template``, and :func:`assert_roundtrip` checks, before training starts, that a
multi-turn history rebuilt from the tags and per-message token ids equals the template's own
render. :func:`strip_template_tags` removes template and special tokens from any text the
counterpart will read; the games clean what crosses to the other party with :mod:`negolib.core.crossing` (its
:func:`clean_prose` and :data:`TEMPLATE_TAG_RE` are re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from negolib.core.crossing import TEMPLATE_TAG_RE, clean_prose

_S, _U1, _A1, _U2 = "negobookSYSTEM", "negobookUSERONE", "negobookASSISTANTONE", "negobookUSERTWO"


class ChatTemplateError(ValueError):
    """The chat template cannot be split into turn tags, or the tags do not round-trip."""


@dataclass(frozen=True)
class Tag:
    """A piece of template text and its token ids (encoded without special-token insertion)."""

    text: str
    ids: tuple[int, ...]


@dataclass(frozen=True)
class TurnTags:
    """The tags around a turn: what opens a user turn, closes it, opens an assistant turn (the
    generation prompt) and closes it. ``stop_ids`` end a generated turn (the first token of the
    assistant close, plus the tokenizer's EOS)."""

    user_open: Tag
    user_close: Tag
    assistant_open: Tag
    assistant_close: Tag
    stop_ids: tuple[int, ...]
    assistant_history_open: Tag | None = None  # set only where a re-render opens past turns differently

    @property
    def appendable(self) -> bool:
        """Whether appending tokens turn by turn reproduces the template's own render."""
        return self.assistant_history_open is None

    def close_remainder(self, completion_ids: Sequence[int]) -> list[int]:
        """Ids that finish the assistant turn after ``completion_ids`` (which may already end with
        the close's first token, as generation stops there)."""
        close = list(self.assistant_close.ids)
        if completion_ids and close and completion_ids[-1] == close[0]:
            return close[1:]
        return close

    def observation_ids(self, tokenizer: Any, prose: str, completion_ids: Sequence[int] = (),
                        prose_ids: Sequence[int] | None = None) -> list[int]:
        """Ids to append after a completion: the rest of the assistant close, the counterpart's
        user turn holding ``prose`` (or ``prose_ids``), and the next generation prompt."""
        body = list(prose_ids) if prose_ids is not None else encode_text(tokenizer, prose)
        return (self.close_remainder(completion_ids) + list(self.user_open.ids) + body
                + list(self.user_close.ids) + list(self.assistant_open.ids))


def encode_text(tokenizer: Any, text: str) -> list[int]:
    """Token ids of ``text`` with no BOS/EOS insertion."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def render_chat(tokenizer: Any, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True,
                thinking: bool = False) -> str:
    """The template's text for ``messages`` (``enable_thinking`` passed for templates that read it)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ChatTemplateError(f"tokenizer {type(tokenizer).__name__} has no chat_template; set one")
    return tokenizer.apply_chat_template(list(messages), tokenize=False,
                                         add_generation_prompt=add_generation_prompt, enable_thinking=thinking)


def encode_chat(tokenizer: Any, messages: Sequence[dict[str, str]], add_generation_prompt: bool = True,
                thinking: bool = False) -> list[int]:
    """Token ids of the rendered chat (the template writes BOS itself where it wants one)."""
    return encode_text(tokenizer, render_chat(tokenizer, messages, add_generation_prompt, thinking))


def _after(full: str, prefix: str, what: str) -> str:
    if not full.startswith(prefix):
        raise ChatTemplateError(f"the chat template does not render {what} as an extension of the shorter "
                                f"dialogue; cannot derive turn tags:\n{prefix!r}\nvs\n{full!r}")
    return full[len(prefix):]


def _tag(tokenizer: Any, text: str) -> Tag:
    return Tag(text, tuple(encode_text(tokenizer, text)))


def derive_turn_tags(tokenizer: Any, thinking: bool = False, strict: bool = True) -> TurnTags:
    """Find the turn tags of ``tokenizer``'s chat template by differencing renders of a test dialogue.

    ``strict`` (for training) raises when the template re-renders a past assistant turn with a
    different opening than its generation prompt (e.g. an empty thought-channel prologue on the
    prompt only, App. J); with ``strict=False`` (generation only) such tags are returned with
    ``assistant_history_open`` set and ``appendable`` false.
    """
    sys_u1 = [{"role": "system", "content": _S}, {"role": "user", "content": _U1}]
    a = render_chat(tokenizer, sys_u1, False, thinking)
    b = render_chat(tokenizer, sys_u1, True, thinking)
    gen = _after(b, a, "the generation prompt")
    with_a1 = [*sys_u1, {"role": "assistant", "content": _A1}]
    c = render_chat(tokenizer, with_a1, False, thinking)
    rest = _after(c, a, "an assistant turn")
    if _A1 not in rest:
        raise ChatTemplateError(f"assistant content does not appear verbatim in the render: {rest!r}")
    hist_open, a_close = rest.split(_A1, 1)
    if hist_open != gen and strict:
        raise ChatTemplateError(
            f"the template opens a past assistant turn with {hist_open!r} but prompts generation with "
            f"{gen!r}; a rollout that appends tokens would drift from the template's own render")
    d = render_chat(tokenizer, [*with_a1, {"role": "user", "content": _U2}], False, thinking)
    rest = _after(d, c, "a second user turn")
    if _U2 not in rest:
        raise ChatTemplateError(f"user content does not appear verbatim in the render: {rest!r}")
    u_open, u_close = rest.split(_U2, 1)
    if not gen or not a_close or not u_open:
        raise ChatTemplateError(f"empty turn tag: open={u_open!r} close={a_close!r} generation={gen!r}")
    tags = {name: _tag(tokenizer, text) for name, text in
            (("user_open", u_open), ("user_close", u_close), ("assistant_open", gen), ("assistant_close", a_close))}
    stops = [tags["assistant_close"].ids[0]] if tags["assistant_close"].ids else []
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int) and eos not in stops:
        stops.append(eos)
    history_open = _tag(tokenizer, hist_open) if hist_open != gen else None
    return TurnTags(**tags, stop_ids=tuple(stops), assistant_history_open=history_open)


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def assert_roundtrip(tokenizer: Any, tags: TurnTags, messages: Sequence[dict[str, str]],
                     thinking: bool = False) -> list[int]:
    """Rebuild ``messages`` the way a rollout does and check it equals the template's own render.

    The head (everything up to the first assistant message) is rendered by the template; every later
    turn is appended from ``tags`` and per-message token ids, as a training rollout appends them.
    Returns the ids; raises :class:`ChatTemplateError` naming the first differing token otherwise.
    """
    if not tags.appendable:
        raise ChatTemplateError(
            f"the template re-renders past assistant turns with {tags.assistant_history_open.text!r} but prompts "
            f"generation with {tags.assistant_open.text!r}; appended rollouts cannot match its own render")
    roles = [m["role"] for m in messages]
    if "assistant" not in roles:
        raise ChatTemplateError("the round-trip dialogue needs at least one assistant message")
    first = roles.index("assistant")
    ids = encode_chat(tokenizer, messages[:first], True, thinking)
    completion: list[int] = []
    for i in range(first, len(messages)):
        m = messages[i]
        if m["role"] == "assistant":
            completion = encode_text(tokenizer, m["content"]) + list(tags.assistant_close.ids[:1])
            ids += completion
        elif m["role"] == "user":
            if i == 0 or messages[i - 1]["role"] != "assistant":
                raise ChatTemplateError(f"message {i}: a rollout appends a user turn only after an assistant turn")
            ids += tags.observation_ids(tokenizer, m["content"], completion)
        else:
            raise ChatTemplateError(f"message {i}: role {m['role']!r} cannot follow the first assistant turn")
    ends_user = roles[-1] == "user"
    if not ends_user:
        ids += tags.close_remainder(completion)
    expected = encode_chat(tokenizer, messages, ends_user, thinking)
    if ids != expected:
        k = _first_diff(ids, expected)
        ctx = slice(max(0, k - 8), k + 8)
        raise ChatTemplateError(
            f"turn tags do not round-trip at token {k} of {len(expected)}: rebuilt "
            f"{tokenizer.decode(ids[ctx])!r} vs template {tokenizer.decode(expected[ctx])!r}")
    return ids


def special_token_texts(tokenizer: Any) -> list[str]:
    """Every special / added-special token string of ``tokenizer``, longest first."""
    found = set(getattr(tokenizer, "all_special_tokens", []) or [])
    for tok in (getattr(tokenizer, "added_tokens_decoder", {}) or {}).values():
        if getattr(tok, "special", False):
            found.add(str(tok))
    return sorted((t for t in found if t), key=len, reverse=True)


def strip_template_tags(text: str, tokenizer: Any | None = None, tags: TurnTags | None = None) -> str:
    """``text`` without chat-template tags or special tokens (for counterpart-visible text).

    Repeated until nothing is left to remove, so a tag cannot be rebuilt from pieces around another
    (``<|im_<|endoftext|>end|>``)."""
    return strip_template_tags_counted(text, tokenizer, tags)[0]


def strip_template_tags_counted(text: str, tokenizer: Any | None = None,
                                tags: TurnTags | None = None) -> tuple[str, int]:
    """(:func:`strip_template_tags` of ``text``, how many tags and special tokens it removed): the count is
    the template-tag guard's (a leak the agent caught before the counterpart could read it)."""
    cut = [tag.text for tag in (tags.user_open, tags.assistant_open, tags.user_close, tags.assistant_close)
           if tag.text.strip()] if tags is not None else []
    specials = special_token_texts(tokenizer) if tokenizer is not None else []
    n = 0
    while True:
        before = text
        for tag in cut:
            n += text.count(tag)
            text = text.replace(tag, "\n")
        for tok in specials:
            n += text.count(tok)
            text = text.replace(tok, "")
        text, k = TEMPLATE_TAG_RE.subn("", text)
        n += k
        if text == before:
            return text.strip(), n


def decode_turn(tokenizer: Any, ids: Sequence[int], tags: TurnTags | None = None) -> str:
    """Generated ids as counterpart-safe text: decoded verbatim, then template tags stripped."""
    return decode_turn_counted(tokenizer, ids, tags)[0]


def decode_turn_counted(tokenizer: Any, ids: Sequence[int], tags: TurnTags | None = None) -> tuple[str, int]:
    """(:func:`decode_turn` of ``ids``, how many template tags were stripped from it)."""
    text = tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return strip_template_tags_counted(text, tokenizer, tags)


__all__ = ["TEMPLATE_TAG_RE", "ChatTemplateError", "Tag", "TurnTags", "assert_roundtrip", "clean_prose",
           "decode_turn", "decode_turn_counted", "derive_turn_tags", "encode_chat", "encode_text", "render_chat",
           "special_token_texts", "strip_template_tags", "strip_template_tags_counted"]
