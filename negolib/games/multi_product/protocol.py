"""The four-part message protocol of the multi-product market (our format: the source leaves it open) and its parsers.

Contract: a seller message is exactly four parts, one per line, in this order (blank lines between them and one
wrapping code fence are tolerated, nothing else)::

    TO: buyer_2
    PRODUCT: product_1
    PRICE: 123.45
    MESSAGE: free text to that buyer (may continue on the lines below)

TO names a buyer ``buyer_<m>`` (1..M), PRODUCT a product ``product_<k>`` (1..K), PRICE a positive number of dollars
(digits, at most two decimals, an optional leading ``$``; no commas, units, signs or exponents), MESSAGE a
non-empty text of at most 1,000 characters in which no line starts with a part label. Anything else is a bad parse
naming the failing part. A buyer answers ``ACCEPT`` or ``DECLINE`` on its first line, then an optional message.
Both parsers read the text only after :func:`negolib.core.crossing.scrub` (line breaks made plain, control, invisible
and bidi characters, template and tool-call tags removed), so a label hidden by such characters is still a label; the
message that reaches the other party is one clean line (:func:`negolib.core.crossing.one_line`).
:func:`parse_message` and :func:`parse_answer` never raise.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from negolib.core.crossing import one_line, scrub
from negolib.games.toolcalls import short

PARTS: tuple[str, str, str, str] = ("TO", "PRODUCT", "PRICE", "MESSAGE")
ACCEPT, DECLINE = "ACCEPT", "DECLINE"
MAX_PRICE = 100_000_000.0
MAX_MESSAGE_CHARS = 1000
MAX_TEXT_CHARS = 16_000
_FENCE_RE = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.S)
_PART_RE = {p: re.compile(rf"{p}:[ \t]*(.*?)[ \t]*\Z") for p in PARTS}
_BUYER_RE = re.compile(r"buyer_([1-9][0-9]{0,2})")
_PRODUCT_RE = re.compile(r"product_([1-9][0-9]{0,2})")
_PRICE_RE = re.compile(r"\$?([0-9]{1,12}(?:\.[0-9]{1,2})?)")
_LABEL_LINE_RE = re.compile(r"^[ \t>*_#-]*(?:TO|PRODUCT|PRICE|MESSAGE|RECIPIENT)[ \t*_]*:", re.I | re.M)


class Offer(NamedTuple):
    """A valid seller message's decision: offer ``product`` (0-based) to ``buyer`` (0-based) at ``price``."""

    buyer: int
    product: int
    price: float

    def to_dict(self) -> dict[str, Any]:
        return {"to": f"buyer_{self.buyer + 1}", "product": f"product_{self.product + 1}", "price": self.price}


class ParsedMessage(NamedTuple):
    """A parsed seller message: the cleaned MESSAGE text, the offer (None: a bad parse), the error and the part that
    failed (``"TO"``, ``"PRODUCT"``, ``"PRICE"``, ``"MESSAGE"`` or ``"format"``)."""

    message: str
    offer: Offer | None
    error: str | None = None
    part: str | None = None

    @property
    def bad(self) -> bool:
        return self.error is not None


class ParsedAnswer(NamedTuple):
    """A parsed buyer answer: accepted or not, the cleaned message, and why it was unreadable (read as a decline)."""

    accept: bool
    message: str
    error: str | None = None


def _show(text: str) -> str:
    """``text`` quoted, short and clean, for an error message."""
    return repr(short(text, 40))


def _bad(part: str, why: str, message: str = "") -> ParsedMessage:
    return ParsedMessage(message, None, f"{part}: {why}", part)


def parse_message(text: Any, n_buyers: int, n_products: int) -> ParsedMessage:
    """Parse one seller message of a market of ``n_buyers`` and ``n_products``; never raises."""
    try:
        return _parse_message(text, n_buyers, n_products)
    except Exception as exc:  # noqa: BLE001 - a hostile input is a bad parse, never a crash
        return _bad("format", f"unreadable message ({type(exc).__name__})")


def _parse_message(text: Any, n_buyers: int, n_products: int) -> ParsedMessage:
    if not isinstance(text, str):
        return _bad("format", f"a message must be text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        return _bad("format", f"longer than {MAX_TEXT_CHARS} characters")
    body = scrub(text).strip()  # characters, line breaks and tags first: no label can hide from the checks below
    fenced = _FENCE_RE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    lines = body.split("\n")
    parts: list[str] = []
    i = 0
    for p in PARTS[:3]:
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines):
            return _bad(p, f"missing (expected a line '{p}: ...')")
        m = _PART_RE[p].match(lines[i].strip())
        if m is None:
            return _bad(p, f"expected a line '{p}: ...' here, got {_show(lines[i])}")
        parts.append(m.group(1))
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i >= len(lines):
        return _bad("MESSAGE", "missing (expected a line 'MESSAGE: ...' after PRICE)")
    m = _PART_RE["MESSAGE"].match(lines[i].lstrip())
    if m is None:
        return _bad("MESSAGE", f"expected a line 'MESSAGE: ...' here, got {_show(lines[i])}")
    raw_message = "\n".join([m.group(1), *lines[i + 1:]]).strip()
    message = one_line(raw_message)
    to, product, price = parts
    mb = _BUYER_RE.fullmatch(to)
    if mb is None or not 1 <= int(mb.group(1)) <= n_buyers:
        return _bad("TO", f"unknown recipient {_show(to)}; buyers are buyer_1 .. buyer_{n_buyers}", message)
    mp = _PRODUCT_RE.fullmatch(product)
    if mp is None or not 1 <= int(mp.group(1)) <= n_products:
        return _bad("PRODUCT", f"unknown product {_show(product)}; products are product_1 .. product_{n_products}",
                    message)
    mr = _PRICE_RE.fullmatch(price)
    if mr is None:
        return _bad("PRICE", f"not a price in dollars: {_show(price)} (digits, at most two decimals)", message)
    value = float(mr.group(1))
    if not 0 < value <= MAX_PRICE:
        return _bad("PRICE", f"must be positive and at most {MAX_PRICE:,.0f}, got {value:g}", message)
    if not message:
        return _bad("MESSAGE", "empty: write a message to the buyer", message)
    if len(raw_message) > MAX_MESSAGE_CHARS:
        return _bad("MESSAGE", f"longer than {MAX_MESSAGE_CHARS} characters", message)
    if _LABEL_LINE_RE.search(raw_message):
        return _bad("MESSAGE", "a line of the message starts with a part label (one message, four parts)", message)
    return ParsedMessage(message, Offer(int(mb.group(1)) - 1, int(mp.group(1)) - 1, value))


def format_message(offer: Offer, message: str) -> str:
    """The four-part text of ``offer`` with ``message``."""
    return (f"TO: buyer_{offer.buyer + 1}\nPRODUCT: product_{offer.product + 1}\nPRICE: {offer.price:.2f}\n"
            f"MESSAGE: {message}")


def parse_answer(text: Any) -> ParsedAnswer:
    """Parse a buyer's answer: ``ACCEPT`` or ``DECLINE`` alone on the first line (case as written), then an optional
    message; anything else is unreadable, read as a decline. Never raises."""
    if not isinstance(text, str):
        return ParsedAnswer(False, "", f"an answer must be text, got {type(text).__name__}")
    body = scrub(text[:MAX_TEXT_CHARS]).strip()
    head, _, rest = body.partition("\n")
    word = head.strip().rstrip(".!")
    message = one_line(rest)
    if word == ACCEPT:
        return ParsedAnswer(True, message)
    if word == DECLINE:
        return ParsedAnswer(False, message)
    return ParsedAnswer(False, one_line(body),
                        f"the first line must be ACCEPT or DECLINE, got {_show(head)}")


def format_answer(accept: bool, message: str = "") -> str:
    """A buyer's answer text."""
    return (ACCEPT if accept else DECLINE) + (f"\n{message}" if message else "")
