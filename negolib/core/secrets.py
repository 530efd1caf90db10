"""API keys: read from the environment only, never printed, logged or written.

A key is read once, when an API agent is built, so a missing key is a clear error that names the
variable *before* any request is made. The key then lives in a :class:`Secret`, whose ``repr`` and
``str`` never show it; :func:`redact` scrubs it from any text (error messages, settings), and
:class:`RedactingFilter` scrubs it from log records on the handlers it is attached to.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

from negolib.core.errors import NegolibError

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6  # shorter strings are not scrubbed (they would shred ordinary text)


class MissingKeyError(NegolibError, KeyError):
    """The environment variable that should hold an API key is unset or empty."""

    def __init__(self, env_name: str, purpose: str = "") -> None:
        self.env_name = env_name
        why = f" (needed by {purpose})" if purpose else ""
        super().__init__(f"environment variable {env_name} is not set{why}: export {env_name}=... "
                         "before starting the run; keys are read from the environment only")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class Secret:
    """A string that never shows itself: ``repr``/``str`` print the variable name only."""

    __slots__ = ("_value", "env_name")

    def __init__(self, value: str, env_name: str = "") -> None:
        self._value = value
        self.env_name = env_name

    def reveal(self) -> str:
        """The secret value (pass it to an SDK client, nowhere else)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret(${self.env_name or '?'})"

    __str__ = __repr__

    def __reduce__(self):  # never pickle the value into a checkpoint or a worker payload
        raise TypeError("Secret values cannot be pickled")


def require_key(env_name: str, purpose: str = "", environ: Mapping[str, str] | None = None) -> str:
    """The value of ``env_name`` from the environment; :class:`MissingKeyError` if unset or blank."""
    if not env_name or not isinstance(env_name, str):
        raise ValueError(f"api_key_env must name an environment variable, got {env_name!r}")
    value = (os.environ if environ is None else environ).get(env_name, "")
    if not value.strip():
        raise MissingKeyError(env_name, purpose)
    return value.strip()


def _values(keys: Iterable[str | Secret]) -> list[str]:
    vals = [k.reveal() if isinstance(k, Secret) else k for k in keys]
    return sorted({v for v in vals if v and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def redact(text: str, keys: Iterable[str | Secret]) -> str:
    """``text`` with every occurrence of each key replaced by ``[REDACTED]``."""
    for v in _values(keys):
        if v in text:
            text = text.replace(v, REDACTED)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs keys from the formatted message and any exception text.

    Attach it to *handlers* (filters on a logger do not see records propagated from its children);
    :func:`install_redaction` does that for the root logger's handlers.
    """

    def __init__(self, keys: Iterable[str | Secret]) -> None:
        super().__init__()
        self._keys = _values(keys)

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        clean = redact(msg, self._keys)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[1] is not None:
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(formatted, self._keys)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text, self._keys)
        return True

    def __repr__(self) -> str:
        return f"RedactingFilter({len(self._keys)} keys)"

    def __eq__(self, other: object) -> bool:  # so a handler gets one filter per set of keys
        return isinstance(other, RedactingFilter) and sorted(self._keys) == sorted(other._keys)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._keys)))


def install_redaction(keys: Iterable[str | Secret],
                      handlers: Iterable[logging.Handler] | None = None) -> RedactingFilter:
    """Attach one :class:`RedactingFilter` to ``handlers`` (default: the root logger's); returns it."""
    flt = RedactingFilter(keys)
    for h in (logging.getLogger().handlers if handlers is None else handlers):
        if flt not in h.filters:
            h.addFilter(flt)
    return flt


__all__ = ["MissingKeyError", "REDACTED", "RedactingFilter", "Secret", "install_redaction", "redact",
           "require_key"]
