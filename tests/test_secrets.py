"""Keys: read from the environment only, clear error when missing, never shown or logged."""

from __future__ import annotations

import logging
import pickle

import pytest

from negolib.core.secrets import (
    REDACTED,
    MissingKeyError,
    RedactingFilter,
    Secret,
    install_redaction,
    redact,
    require_key,
)

KEY = "sk-test-SENTINEL-0123456789abcdef"


def test_require_key_reads_the_environment(monkeypatch):
    monkeypatch.setenv("NEGOBOOK_TEST_KEY", KEY)
    assert require_key("NEGOBOOK_TEST_KEY") == KEY


@pytest.mark.parametrize("value", [None, "", "   "])
def test_missing_key_names_the_variable(monkeypatch, value):
    monkeypatch.delenv("NEGOBOOK_TEST_KEY", raising=False)
    if value is not None:
        monkeypatch.setenv("NEGOBOOK_TEST_KEY", value)
    with pytest.raises(MissingKeyError, match="NEGOBOOK_TEST_KEY is not set") as info:
        require_key("NEGOBOOK_TEST_KEY", purpose="the seller arm")
    assert "the seller arm" in str(info.value) and info.value.env_name == "NEGOBOOK_TEST_KEY"
    assert isinstance(info.value, KeyError)


def test_require_key_rejects_a_bad_name():
    with pytest.raises(ValueError, match="api_key_env"):
        require_key("")


def test_secret_never_shows_its_value():
    s = Secret(KEY, "OPENAI_API_KEY")
    assert s.reveal() == KEY
    for text in (repr(s), str(s), f"{s}", repr([s]), repr({"k": s})):
        assert KEY not in text and "OPENAI_API_KEY" in text
    with pytest.raises(TypeError):
        pickle.dumps(s)


def test_redact_replaces_every_occurrence_and_ignores_short_strings():
    text = f"Bearer {KEY} and again {KEY}; x-api-key={KEY[:-1]}"
    out = redact(text, [Secret(KEY), "abc"])
    assert KEY not in out and out.count(REDACTED) == 2
    assert redact("abc abc", ["abc"]) == "abc abc"  # too short to scrub


def test_redacting_filter_scrubs_messages_args_and_tracebacks(tmp_path):
    path = tmp_path / "run.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    flt = install_redaction([KEY], handlers=[handler])
    assert isinstance(flt, RedactingFilter) and KEY not in repr(flt)
    logger = logging.getLogger("negolib.test_secrets")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        logger.info("header Authorization: Bearer %s", KEY)
        logging.getLogger("negolib.test_secrets.child").warning("key=%s", KEY)
        try:
            raise RuntimeError(f"server echoed {KEY}")
        except RuntimeError:
            logger.exception("request failed")
    finally:
        logger.removeHandler(handler)
        handler.close()
    text = path.read_text()
    assert KEY not in text
    assert text.count(REDACTED) == 3 and "RuntimeError" in text
