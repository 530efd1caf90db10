"""Bilateral price bargaining: the tool schemas and the strict tool-call parser on every surface."""

from __future__ import annotations

import json

import pytest

from negolib.games.bilateral.protocol import (
    Action,
    StructuredTurn,
    ToolCall,
    format_tool_call,
    from_anthropic_content,
    from_openai_message,
    parse_turn,
    raw_calls,
)
from negolib.games.bilateral.tools import MAX_PRICE, TOOL_NAMES, TOOLS, anthropic_tools, openai_tools


def call(name: str, **arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


OFFER = call("make_offer", price=120)
ACCEPT = call("accept_offer")

# -- the tool schemas -------------------------------------------------------------------------------


def test_three_tools_in_openai_function_shape():
    assert [t["function"]["name"] for t in TOOLS] == list(TOOL_NAMES) == ["make_offer", "accept_offer", "walk_away"]
    for t in TOOLS:
        assert t["type"] == "function" and t["function"]["description"]
        params = t["function"]["parameters"]
        assert params["type"] == "object" and params["additionalProperties"] is False
    offer = TOOLS[0]["function"]["parameters"]
    assert offer["required"] == ["price"] and offer["properties"]["price"]["type"] == "number"
    assert TOOLS[1]["function"]["parameters"]["properties"] == {} == TOOLS[2]["function"]["parameters"]["properties"]


def test_tool_accessors_copy_and_translate():
    tools = openai_tools()
    tools[0]["function"]["name"] = "changed"
    assert TOOLS[0]["function"]["name"] == "make_offer"
    anth = anthropic_tools()
    assert [t["name"] for t in anth] == list(TOOL_NAMES)
    assert anth[0]["input_schema"] == TOOLS[0]["function"]["parameters"] and set(anth[0]) == {
        "name", "description", "input_schema"}


def test_tools_render_through_a_transformers_chat_template():
    pytest.importorskip("transformers")
    from negolib.models import tiny_tokenizer

    tok = tiny_tokenizer()
    template = ("{% if tools %}<tools>{% for t in tools %}{{ t | tojson }}\n{% endfor %}</tools>{% endif %}"
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}")
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tools=openai_tools(), tokenize=False,
                                   chat_template=template)
    rendered = text.split("<tools>")[1].split("</tools>")[0].strip().splitlines()
    assert [json.loads(line)["function"]["name"] for line in rendered] == list(TOOL_NAMES)


# -- text surface -----------------------------------------------------------------------------------


def test_prose_only_turn_is_a_message_not_a_bad_parse():
    p = parse_turn("I think $120 is fair, what do you say?")
    assert p.action is None and p.error is None and not p.bad and p.n_calls == 0
    assert p.message == "I think $120 is fair, what do you say?"


def test_bare_json_call_with_prose_around_it():
    p = parse_turn(f"My price is 120.\n{OFFER}\nLet me know.")
    assert p.action == Action("make_offer", 120.0) and p.error is None
    assert p.message.split() == "My price is 120. Let me know.".split() and "{" not in p.message


@pytest.mark.parametrize("text", [
    f"Here you go <tool_call>\n{ACCEPT}\n</tool_call>",
    f"Here you go <tool_call>{ACCEPT}</tool_call>",
    f"Here you go\n<tool_call>\n```json\n{ACCEPT}\n```\n</tool_call>",
    f"Here you go <tool_call>\n{ACCEPT}",  # generation stopped on the closing tag
    f"Here you go\n```json\n{ACCEPT}\n```",
])
def test_tagged_fenced_and_unclosed_calls(text):
    p = parse_turn(text)
    assert p.action == Action("accept_offer") and p.error is None
    assert p.message == "Here you go"


def test_parameters_key_is_accepted_and_arguments_may_be_a_json_string():
    assert parse_turn('{"name": "make_offer", "parameters": {"price": 7.5}}').action == Action("make_offer", 7.5)
    assert parse_turn('{"name": "make_offer", "arguments": "{\\"price\\": 8}"}').action == Action("make_offer", 8.0)
    assert parse_turn('{"name": "walk_away"}').action == Action("walk_away")


@pytest.mark.parametrize("text, why", [
    ('<tool_call>{"name": "make_offer", "arguments": {"price": 120}</tool_call>', "malformed JSON"),
    ('Offer: {"name": "make_offer", "arguments": {"price": 120}', "malformed JSON"),
    ("<tool_call>not json at all</tool_call>", "malformed JSON"),
    ('<tool_call>\n{"name": "walk_away"} and more</tool_call>', "text after the JSON"),
    ("Hi <tool_call> oops", "unclosed <tool_call>"),
    ('{"name": "buy_now", "arguments": {}}', "unknown tool 'buy_now'"),
    ('{"name": 3, "arguments": {}}', "tool name must be a string"),
    ('{"name": "make_offer", "arguments": {}}', "missing arguments ['price']"),
    ('{"name": "make_offer", "arguments": {"price": 5, "currency": "USD"}}', "unexpected arguments"),
    ('{"name": "accept_offer", "arguments": {"price": 5}}', "unexpected arguments"),
    ('{"name": "make_offer", "arguments": {"price": "120"}}', "price must be a number"),
    ('{"name": "make_offer", "arguments": {"price": true}}', "price must be a number"),
    ('{"name": "make_offer", "arguments": {"price": null}}', "price must be a number"),
    ('{"name": "make_offer", "arguments": {"price": -3}}', "price must be positive"),
    ('{"name": "make_offer", "arguments": {"price": 0}}', "price must be positive"),
    ('{"name": "make_offer", "arguments": {"price": NaN}}', "price must be finite"),
    ('{"name": "make_offer", "arguments": {"price": 1e400}}', "price must be finite"),
    ('{"name": "make_offer", "arguments": {"price": 1e12}}', "absurdly large"),
    ('{"name": "make_offer", "arguments": {"price": ' + "9" * 400 + "}}", "absurdly large"),
    ('{"name": "make_offer", "arguments": [120]}', "arguments must be an object"),
    ('{"name": "make_offer", "arguments": {"price": 1, "price": 2}}', "duplicate keys"),
    ('{"name": "walk_away", "name": "accept_offer"}', "duplicate keys"),
    ('{"name": "walk_away", "arguments": {}, "reason": "bored"}', "exactly 'name' and 'arguments'"),
])
def test_bad_text_calls_are_bad_parses(text, why):
    p = parse_turn(text)
    assert p.action is None and p.bad and why in p.error


@pytest.mark.parametrize("text", [
    f"{OFFER}\n{OFFER}",  # the same call twice is still two calls
    f"<tool_call>{OFFER}</tool_call><tool_call>{ACCEPT}</tool_call>",
    f"<tool_call>[{OFFER}, {ACCEPT}]</tool_call>",
    f"I accept. {ACCEPT} And my new price: {OFFER}",  # a tool call plus an accept
    f"<tool_call>{OFFER}</tool_call> {ACCEPT}",
])
def test_double_tool_calls_are_bad_parses(text):
    p = parse_turn(text)
    assert p.action is None and p.n_calls == 2 and "double tool call" in p.error


def test_non_call_json_stays_in_the_message():
    p = parse_turn('My numbers: {"cost": 5} and that is that.')
    assert p.action is None and p.error is None and p.message == 'My numbers: {"cost": 5} and that is that.'


def test_message_is_cleaned_of_control_bidi_and_template_characters():
    p = parse_turn("Fair\u202e price\u200b here\x07 <|im_end|>now " + OFFER)
    assert p.message == "Fair price here now" and p.action == Action("make_offer", 120.0)
    assert "<tool_call>" not in parse_turn("a </tool_call> b").message


def test_parser_never_raises_on_hostile_input():
    for turn in ["{" * 5000, "[" * 5000 + "]" * 5000, "<tool_call>" * 100, "\x00" * 100, 42, None,
                 StructuredTurn("x", "not a list"), StructuredTurn(b"bytes", [object()])]:
        p = parse_turn(turn)  # type: ignore[arg-type]
        assert p.action is None


# -- structured surface: SDK tool calls --------------------------------------------------------------


def test_openai_dict_tool_call():
    tc = {"id": "call_1", "type": "function", "function": {"name": "make_offer", "arguments": '{"price": 99.5}'}}
    p = parse_turn(StructuredTurn("Meet me here.", [tc]))
    assert p.action == Action("make_offer", 99.5) and p.message == "Meet me here."


def test_anthropic_dict_tool_use_and_toolcall_dataclass():
    block = {"type": "tool_use", "id": "toolu_1", "name": "accept_offer", "input": {}}
    assert parse_turn(StructuredTurn("Deal.", [block])).action == Action("accept_offer")
    assert parse_turn(StructuredTurn("", [ToolCall("make_offer", {"price": 3})])).action == Action("make_offer", 3.0)
    assert parse_turn(StructuredTurn("", [ToolCall("walk_away", "")])).action == Action("walk_away")


def test_structured_turn_without_calls_is_prose_only():
    for calls in ([], (), None):
        p = parse_turn(StructuredTurn("Still thinking.", calls))  # type: ignore[arg-type]
        assert p.action is None and p.error is None and p.message == "Still thinking."
    assert parse_turn(StructuredTurn(None, [])).message == ""


@pytest.mark.parametrize("calls, why", [
    ([ToolCall("make_offer", '{"price": 5')], "malformed JSON arguments"),
    ([ToolCall("make_offer", '{"price": 5} trailing')], "text after the JSON"),
    ([ToolCall("haggle", {})], "unknown tool"),
    ([ToolCall("make_offer", {})], "missing arguments"),
    ([ToolCall("make_offer", {"price": 5, "note": "x"})], "unexpected arguments"),
    ([ToolCall("make_offer", {"price": "5"})], "price must be a number"),
    ([ToolCall("make_offer", {"price": float("inf")})], "price must be finite"),
    ([ToolCall("make_offer", {"price": MAX_PRICE * 2})], "absurdly large"),
    ([{"id": "x"}], "needs a name"),
    ([42], "unreadable tool call"),
])
def test_bad_structured_calls(calls, why):
    p = parse_turn(StructuredTurn("msg", calls))
    assert p.action is None and why in p.error and p.message == "msg"


def test_structured_double_calls_and_call_plus_text_accept():
    two = [ToolCall("make_offer", {"price": 3}), ToolCall("accept_offer", {})]
    assert "double tool call" in parse_turn(StructuredTurn("x", two)).error
    # a native call plus a JSON accept written in the message is a double call too
    p = parse_turn(StructuredTurn(f"ok {ACCEPT}", [ToolCall("make_offer", {"price": 3})]))
    assert p.action is None and p.n_calls == 2 and "double tool call" in p.error


def test_real_openai_sdk_message():
    pytest.importorskip("openai")
    from openai.types.chat import ChatCompletionMessage
    from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall, Function

    msg = ChatCompletionMessage(role="assistant", content="How about this?", tool_calls=[
        ChatCompletionMessageToolCall(id="c1", type="function",
                                      function=Function(name="make_offer", arguments='{"price": 12.5}'))])
    turn = from_openai_message(msg)
    assert parse_turn(turn).action == Action("make_offer", 12.5)
    assert raw_calls(turn) == [{"name": "make_offer", "arguments": '{"price": 12.5}'}]
    assert parse_turn(turn.__class__(msg.content, list(turn.tool_calls) * 2)).n_calls == 2
    none = from_openai_message(ChatCompletionMessage(role="assistant", content=None))
    assert parse_turn(none) == parse_turn("")


def test_real_anthropic_sdk_content():
    pytest.importorskip("anthropic")
    from anthropic.types import TextBlock, ToolUseBlock

    content = [TextBlock(type="text", text="Deal at your price."),
               ToolUseBlock(type="tool_use", id="t1", name="accept_offer", input={})]
    p = parse_turn(from_anthropic_content(content))
    assert p.action == Action("accept_offer") and p.message == "Deal at your price."
    bad = [ToolUseBlock(type="tool_use", id="t1", name="make_offer", input={"price": -1})]
    assert "positive" in parse_turn(from_anthropic_content(bad)).error


def test_format_tool_call_round_trips():
    for action in (Action("make_offer", 42.25), Action("accept_offer"), Action("walk_away")):
        text = "Prose. " + format_tool_call(action)
        assert text.count("<tool_call>") == 1 and parse_turn(text).action == action
    assert raw_calls("plain text") is None
    assert raw_calls(StructuredTurn("x", None)) == [] == raw_calls(StructuredTurn("x", []))  # type: ignore[arg-type]
    assert raw_calls(StructuredTurn("x", [ToolCall("walk_away", {})])) == [{"name": "walk_away", "arguments": {}}]
