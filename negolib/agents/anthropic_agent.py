"""An Anthropic Messages API party (official ``anthropic`` SDK, ``base_url`` configurable).

The rendered chat becomes the Messages shape: system messages join into the ``system`` field,
consecutive same-role turns merge, and the list starts with a user turn. Sampling is sent as
``temperature``, ``top_p``, ``top_k`` (in the body's extras: recent SDKs no longer list them) and
``max_tokens``; a model that rejects one (the paper's
Claude Sonnet 5 rejects temperature [App. A "Sampling"]) has it recorded and dropped, and runs at
the provider default. Anthropic takes no seed; thinking stays off (the field is not sent).
"""

from __future__ import annotations

from typing import Any

from negolib.agents.api_agent import ApiAgent, Completion, InvalidResponse, Messages

OPENING_USER_TEXT = "Please take your turn."


def to_messages_api(messages: Messages) -> tuple[str | None, list[dict[str, str]]]:
    """(system, messages) for the Messages API from an OpenAI-style chat list."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
    turns: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        role = "assistant" if m["role"] == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + "\n\n" + m["content"]}
        else:
            turns.append({"role": role, "content": m["content"]})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": OPENING_USER_TEXT})
    return system, turns


class AnthropicAgent(ApiAgent):
    """A seller or buyer served by the Anthropic Messages API (or a server speaking it)."""

    backend = "anthropic"
    droppable = ("temperature", "top_p", "top_k")

    def __init__(self, name: str, model: str, *, api_key_env: str = "ANTHROPIC_API_KEY",
                 base_url: str | None = None, **kw: Any) -> None:
        super().__init__(name, model, api_key_env=api_key_env, base_url=base_url, **kw)
        if self.sampling.thinking:
            raise ValueError("AnthropicAgent runs with thinking off (the paper's setting); got thinking=True")

    def initial_params(self) -> dict[str, Any]:
        s = self.sampling
        p: dict[str, Any] = {"max_tokens": s.max_new_tokens, "temperature": s.temperature, "top_p": s.top_p}
        if s.top_k is not None and s.top_k > 0:
            p["top_k"] = s.top_k
        return p

    def make_client(self, api_key: str) -> Any:
        import anthropic

        return anthropic.AsyncAnthropic(api_key=api_key, base_url=self.base_url, max_retries=0,
                                        timeout=self.retry.timeout_s)

    async def send(self, client: Any, system: str | None, turns: list[dict[str, Any]], params: dict[str, Any],
                   **kw: Any) -> tuple[Any, Any]:
        """One Messages API request (``max_tokens`` named, the other parameters in the body's extras: recent SDKs
        dropped them; ``kw``: more named arguments, e.g. ``tools``): (response, its content blocks);
        ``InvalidResponse`` without content."""
        kw = {"max_tokens": params["max_tokens"], **kw}
        if system:
            kw["system"] = system
        extra = {k: v for k, v in params.items() if k != "max_tokens"}  # recent SDKs dropped these
        resp = await client.messages.create(model=self.model, messages=turns, extra_body=extra or None, **kw)
        blocks = getattr(resp, "content", None)
        if blocks is None:
            raise InvalidResponse("response has no content")
        return resp, blocks

    @staticmethod
    def completion(resp: Any, text: str) -> Completion:
        """The :class:`Completion` of a response whose text is ``text``: the token usage and the stop reason."""
        usage = getattr(resp, "usage", None)
        return Completion(text, int(getattr(usage, "input_tokens", 0) or 0),
                          int(getattr(usage, "output_tokens", 0) or 0), getattr(resp, "stop_reason", None))

    async def request(self, client: Any, messages: Messages, params: dict[str, Any]) -> Completion:
        resp, blocks = await self.send(client, *to_messages_api(messages), params)
        return self.completion(resp, "".join(getattr(b, "text", "") for b in blocks
                                             if getattr(b, "type", None) == "text"))


__all__ = ["AnthropicAgent", "to_messages_api"]
