"""The one validator (negolib.core.schema): every rule, with errors naming the file and the dotted field."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pytest

from negolib.core.errors import ValidationError
from negolib.core.schema import build, convert, type_name


@dataclass(frozen=True)
class Inner:
    rate: float = 0.5
    mode: Literal["a", "b"] = "a"

    def __post_init__(self) -> None:
        if not 0 <= self.rate <= 1:
            raise ValueError(f"Inner.rate must be in [0, 1], got {self.rate}")


@dataclass(frozen=True)
class Outer:
    name: str
    steps: int = 1
    tags: tuple[str, ...] = ()
    mix: Mapping[str, float] = field(default_factory=dict)
    inner: Inner = field(default_factory=Inner)
    maybe: int | None = None
    items: list[Inner] = field(default_factory=list)
    source: str = ""


def test_build_converts_and_defaults():
    o = build(Outer, {"name": "x", "steps": 3, "tags": ["p", "q"], "mix": {"a": 1}, "inner": {"rate": 1},
                      "items": [{"mode": "b"}]}, "f.yaml")
    assert o == Outer("x", 3, ("p", "q"), {"a": 1.0}, Inner(1.0), None, [Inner(0.5, "b")])
    assert isinstance(o.inner.rate, float) and isinstance(o.mix["a"], float)  # ints read as floats


@pytest.mark.parametrize("data, where, words", [
    ({}, "name", "is required (str)"),
    ({"name": "x", "stesp": 2}, "<top>", "unknown keys ['stesp']"),
    ({"name": "x", "steps": 1.5}, "steps", "must be int, got 1.5"),
    ({"name": "x", "steps": True}, "steps", "must be int, got True"),
    ({"name": "x", "tags": "p"}, "tags", "must be a list of str"),
    ({"name": "x", "mix": {"a": "1"}}, "mix.a", "must be float"),
    ({"name": "x", "inner": {"mode": "c"}}, "inner.mode", "must be one of 'a', 'b'"),
    ({"name": "x", "inner": {"rate": 2}}, "inner.rate", "must be in [0, 1], got 2.0"),  # the class's own check
    ({"name": "x", "items": [{}, {"rate": "y"}]}, "items[1].rate", "must be float"),
    ({"name": "x", "maybe": "3"}, "maybe", "must be int"),
    ({"name": "x", "inner": 3}, "inner", "must be a mapping (Inner)"),
])
def test_errors_name_the_file_and_the_field(data, where, words):
    with pytest.raises(ValidationError) as e:
        build(Outer, data, "f.yaml")
    assert e.value.field == where and words in e.value.problem and str(e.value).startswith("f.yaml"), str(e.value)


def test_reserved_fields_and_hooks():
    with pytest.raises(ValidationError, match=r"unknown keys \['source'\]"):
        build(Outer, {"name": "x", "source": "y"}, "f.yaml", reserved={"source"})
    seen = []
    out = build(Outer, {"name": "x", "inner": {"anything": 1}}, "f.yaml",
                hooks={Inner: lambda v, s, w: seen.append((v, s, w)) or Inner(0.25)})
    assert out.inner == Inner(0.25) and seen == [({"anything": 1}, "f.yaml", "inner")]
    assert convert(None, int | None, "f", "w") is None and type_name(int | None) == "int or null"
