"""The style detectors of the sellers' prose [paper App. E, Table 6]: openers, "I appreciate", JSON leaking into
prose, unfilled placeholders and the buyer's voice. Pure text functions (a string in, a flag or the matches out);
:mod:`negolib.study.diagnostics` applies them to transcript records (its module docstring defines each detector)."""

from __future__ import annotations

import re

_WORD_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)*")
_LEAD_RE = re.compile(r"^[\s\"'“”‘’*_>#\-(]+")


def straight_quotes(text: str) -> str:
    """``text`` with curly single quotes made straight (None reads as empty)."""
    return (text or "").replace("’", "'").replace("‘", "'")


def opener(text: str, n_words: int = 3) -> str:
    """The first ``n_words`` words of ``text``, lower-cased ('' for no words)."""
    return " ".join(_WORD_RE.findall(straight_quotes(text).lower())[:n_words])


def starts_with_i_appreciate(text: str) -> bool:
    """True when the prose opens with the literal "I appreciate" (leading quotes/markdown ignored)."""
    return _LEAD_RE.sub("", straight_quotes(text)).lower().startswith("i appreciate")


_JSON_PATTERNS: dict[str, re.Pattern[str]] = {
    "action_key": re.compile(r'"\s*(?:action|terms)\s*"', re.I),
    "term_key": re.compile(r'"\s*(?:name|value|notes)\s*"\s*:', re.I),
    "empty_brackets": re.compile(r"\[\s*\]|\{\s*\}"),
    "json_sequence": re.compile(r"\[\s*\{|\}\s*\]|\{\s*\""),
}


def json_fragments(text: str) -> list[str]:
    """Kinds of JSON-action fragments left in prose (see module docstring); [] when clean."""
    text = text or ""
    found = [k for k, pat in _JSON_PATTERNS.items() if pat.search(text)]
    if text.count("[") != text.count("]") or text.count("{") != text.count("}"):
        found.append("unbalanced_bracket")
    return found


def has_json_leak(text: str) -> bool:
    """True when the prose carries any JSON-action fragment."""
    return bool(json_fragments(text))


_PH_WORDS = (r"mention|insert|enter|add|fill(?:\s+in)?|specify|describe|include|your|name|company|buyer|"
             r"seller|date|amount|number|placeholder|tbd|todo|x{2,}")
PLACEHOLDER_RE = re.compile(
    r"(?i:\[\s*(?:" + _PH_WORDS + r")\b[^\[\]\n]{0,60}\])"          # [mention your specialty], [Your Name]
    r"|(?i:<\s*(?:insert|enter|your|name|placeholder)\b[^<>\n]{0,60}>)"  # <insert price>
    r"|\{\{?\s*[A-Za-z_][A-Za-z0-9_]*(?:\s+[A-Za-z0-9_]+){0,3}\s*\}\}?"  # {name}, {{buyer_name}}
    r"|\[[A-Z][A-Z0-9_ ]{2,40}\]"                                     # [COMPANY NAME]
)


def find_placeholders(text: str) -> list[str]:
    """Unfilled prompt placeholders in ``text``, in order."""
    return [m.group(0) for m in PLACEHOLDER_RE.finditer(text or "")]


# Buyer-voice heuristics: a first-person subject ("I", "we") that wants to buy, has a budget, can
# afford or is willing to pay, is the buyer, or asks for a lower price. Positives: "I'm interested
# in buying your car", "my budget is tight", "I'd like to purchase the sedan", "could you lower the
# price?". Negatives: the buyer's intent in the second person ("your budget", "if you're looking to
# buy", "thanks for your interest in buying"), selling ("I'd like to sell"), "buy some time", and
# paying a cost ("I can pay for the delivery"). Like the paper's detector it is deliberately broad,
# so only within-table comparisons of its rates are meaningful [Table 6].
_I = r"(?:i'?m|i am|we'?re|we are)"
_BUY = r"(?:buy|buying|purchase|purchasing|acquire|acquiring)\b(?!\s+(?:some\s+|more\s+)?time)"
BUYER_VOICE_PATTERNS: tuple[str, ...] = (
    rf"\b{_I}\s+(?:\w+\s+)?(?:interested in|looking to|hoping to|keen to|planning to|here to|ready to)"
    rf"\s+{_BUY}",
    rf"\b(?:i|we)(?:'d| would)\s+(?:really\s+)?(?:like|love|want)\s+to\s+{_BUY}",
    rf"\b(?:i|we)\s+(?:want|need|plan|intend)\s+to\s+{_BUY}",
    r"\b(?:my|our)\s+(?:total\s+|maximum\s+|max\s+|overall\s+)?budget\b",
    rf"\b{_I}\s+(?:in the market for|shopping for|looking to buy)\b",
    r"\b(?:i|we)\s+can\s+(?:only\s+)?(?:afford|spend)\b",
    rf"\b{_I}\s+(?:only\s+)?(?:willing|prepared|able)\s+to\s+(?:pay|spend)\b",
    rf"\b{_I}\s+(?:the\s+|a\s+)?(?:buyer|purchaser)\b",
    r"\b(?:can|could|would)\s+you\s+(?:please\s+)?(?:lower|reduce|drop|bring down|come down on)\s+"
    r"(?:the\s+|your\s+)?(?:asking\s+)?price\b",
)
_BUYER_VOICE_RE = [re.compile(p, re.I) for p in BUYER_VOICE_PATTERNS]
# Every pattern contains one of these stems: a cheap test that skips most turns.
_BUYER_VOICE_STEMS = ("buy", "purchas", "acqui", "budget", "afford", "spend", "pay", "price", "market",
                      "shopping")


def _maybe_buyer_voice(text: str) -> bool:
    low = text.lower()
    return any(s in low for s in _BUYER_VOICE_STEMS)


def buyer_voice_matches(text: str) -> list[str]:
    """The buyer-voice phrases found in a seller's prose (the seller speaks as if buying)."""
    t = straight_quotes(text)
    if not _maybe_buyer_voice(t):
        return []
    return [m.group(0) for pat in _BUYER_VOICE_RE for m in pat.finditer(t)]


def is_buyer_voice(text: str) -> bool:
    """True when the seller's prose reads as the buyer's (see :data:`BUYER_VOICE_PATTERNS`)."""
    t = straight_quotes(text)
    return _maybe_buyer_voice(t) and any(pat.search(t) for pat in _BUYER_VOICE_RE)


__all__ = ["BUYER_VOICE_PATTERNS", "PLACEHOLDER_RE", "buyer_voice_matches", "find_placeholders", "has_json_leak",
           "is_buyer_voice", "json_fragments", "opener", "starts_with_i_appreciate", "straight_quotes"]
