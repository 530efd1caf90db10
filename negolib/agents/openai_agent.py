"""An OpenAI-compatible chat-completions party: OpenAI itself, ``vllm serve``, ``transformers serve``.

Sampling is sent as declared: ``temperature``, ``top_p``, ``max_tokens``, ``seed`` (when set) and
``top_k`` in the request body's extras (vLLM and most open servers read it; OpenAI rejects it,
and the agent records that and drops it). Thinking is sent as ``chat_template_kwargs`` when
``send_thinking`` is set or thinking is on. A 400 that renames ``max_tokens`` to
``max_completion_tokens`` (newer OpenAI models) switches the cap's name and keeps its value.
"""

from __future__ import annotations

from typing import Any

from negolib.agents.api_agent import ApiAgent, Completion, InvalidResponse, Messages


class OpenAIAgent(ApiAgent):
    """A seller or buyer served by any OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    backend = "openai"
    droppable = ("temperature", "top_p", "top_k", "seed", "chat_template_kwargs", "max_tokens")
    extra_body_params = ("top_k", "chat_template_kwargs")

    def __init__(self, name: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 base_url: str | None = None, send_thinking: bool = False, **kw: Any) -> None:
        self.send_thinking = send_thinking
        super().__init__(name, model, api_key_env=api_key_env, base_url=base_url, **kw)

    def initial_params(self) -> dict[str, Any]:
        s = self.sampling
        p: dict[str, Any] = {"max_tokens": s.max_new_tokens, "temperature": s.temperature, "top_p": s.top_p}
        if s.top_k is not None and s.top_k > 0:
            p["top_k"] = s.top_k
        if getattr(s, "seed", None) is not None:
            p["seed"] = s.seed
        if self.send_thinking or s.thinking:
            p["chat_template_kwargs"] = {"enable_thinking": bool(s.thinking)}
        return p

    def accepts_rejection(self, param: str, detail: str) -> bool:
        if param != "max_tokens":
            return True  # a cap that is too large is a real error, not a rejected parameter
        low = detail.lower()
        return "max_completion_tokens" in low and ("not supported" in low or "unsupported" in low)

    def on_rejected(self, param: str, reason: str) -> dict[str, Any]:
        if param == "max_tokens":  # never drop the cap: newer OpenAI models want another name
            return {"max_completion_tokens": self.sampling.max_new_tokens}
        return {}

    def make_client(self, api_key: str) -> Any:
        import openai

        return openai.AsyncOpenAI(api_key=api_key, base_url=self.base_url, max_retries=0,
                                  timeout=self.retry.timeout_s)

    async def send(self, client: Any, messages: Any, params: dict[str, Any], **kw: Any) -> tuple[Any, Any, Any]:
        """One chat-completions request (``params`` past the SDK's named arguments go in the body's extras; ``kw``:
        more named arguments, e.g. ``tools``): (response, its first choice, that choice's message);
        ``InvalidResponse`` without them."""
        extra = {k: params[k] for k in self.extra_body_params if k in params}
        named = {k: v for k, v in params.items() if k not in self.extra_body_params}
        resp = await client.chat.completions.create(model=self.model, messages=messages,
                                                    extra_body=extra or None, **named, **kw)
        choices = getattr(resp, "choices", None)
        if not choices:
            raise InvalidResponse("response has no choices")
        choice = choices[0]
        msg = getattr(choice, "message", None)
        if msg is None:
            raise InvalidResponse("response choice has no message")
        return resp, choice, msg

    @staticmethod
    def completion(resp: Any, choice: Any, msg: Any) -> Completion:
        """The :class:`Completion` of a response: the message's text, the token usage, the finish reason."""
        usage = getattr(resp, "usage", None)
        return Completion(msg.content or "", int(getattr(usage, "prompt_tokens", 0) or 0),
                          int(getattr(usage, "completion_tokens", 0) or 0), getattr(choice, "finish_reason", None))

    async def request(self, client: Any, messages: Messages, params: dict[str, Any]) -> Completion:
        return self.completion(*await self.send(client, messages, params))


__all__ = ["OpenAIAgent"]
