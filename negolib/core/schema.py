"""One validator for every schema of the project: a dataclass built from a YAML/JSON mapping, checked field by field.

Contract: :func:`build` turns a mapping into a dataclass (unknown keys, missing required keys and values of the wrong
type are :class:`~negolib.core.errors.ValidationError` naming the file and the dotted field), recursing through nested
dataclasses, lists, tuples, mappings, unions and literals (:func:`convert`); ints are accepted for floats and lists
for tuples. A dataclass's own ``__post_init__`` check raising ``ValueError("<Class>.<field> <problem>")`` is
reported under that field. Profiles (:mod:`negolib.params`), the GRPO recipe and the warm-up
(:mod:`negolib.training.config`) all validate through it; callers may hook a type (``hooks``) with its own checks.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from negolib.core.errors import ValidationError

Hook = Callable[[Any, str, str], Any]
"""``(value, source, where) -> the converted value``: a type's own checks (e.g. a profile's agent specs)."""


def type_name(tp: Any) -> str:
    """How an error message names the annotation ``tp`` ("a list of int", "one of 'a', 'b'", ...)."""
    origin = get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) for a in get_args(tp))
    if origin is list or (origin is tuple and get_args(tp)[-1:] == (Ellipsis,)):
        return f"a list of {type_name(get_args(tp)[0])}"
    if origin in (dict, Mapping):
        return f"a mapping of str to {type_name(get_args(tp)[1])}"
    if tp is type(None):
        return "null"
    if dataclasses.is_dataclass(tp):
        return f"a mapping ({tp.__name__})"
    return getattr(tp, "__name__", str(tp))


def convert(value: Any, tp: Any, source: str, where: str, *, hooks: Mapping[type, Hook] | None = None,
            reserved: Collection[str] = ()) -> Any:
    """Check ``value`` against the annotation ``tp`` (recursively) and return it converted; errors name ``source``
    and ``where`` (the dotted field). ``hooks``: types converted by their own function; ``reserved``: dataclass
    fields never read from the mapping."""
    if tp is Any:
        return value
    if hooks and tp in hooks:
        return hooks[tp](value, source, where)
    origin = get_origin(tp)
    bad = ValidationError(source, where, f"must be {type_name(tp)}, got {value!r}")

    def sub(v: Any, t: Any, w: str) -> Any:
        return convert(v, t, source, w, hooks=hooks, reserved=reserved)

    if dataclasses.is_dataclass(tp):
        return build(tp, value, source, where, hooks=hooks, reserved=reserved)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise bad
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return sub(value, a, where)
            except ValidationError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        raise bad
    if origin is Literal:
        if value in get_args(tp):
            return value
        raise bad
    if origin is list:
        if not isinstance(value, list):
            raise bad
        return [sub(v, get_args(tp)[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is tuple and len(get_args(tp)) == 2 and get_args(tp)[1] is Ellipsis:  # tuple[X, ...]: a list
        if not isinstance(value, (list, tuple)):
            raise bad
        return tuple(sub(v, get_args(tp)[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping):
        if not isinstance(value, Mapping):
            raise bad
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValidationError(source, where, f"keys must be strings, got {k!r}")
            out[k] = sub(v, get_args(tp)[1], f"{where}.{k}" if where else k)
        return out
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if tp is str:
        if isinstance(value, str):
            return value
        raise bad
    raise TypeError(f"unsupported annotation {tp!r} at {where}")


def build(cls: type, data: Any, source: str, where: str = "", *, hooks: Mapping[type, Hook] | None = None,
          reserved: Collection[str] = ()) -> Any:
    """Build dataclass ``cls`` from a mapping (None: every default): unknown keys, missing required keys and bad
    types are errors naming ``source`` and the field under ``where``."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ValidationError(source, where or "<top>", f"must be a mapping ({cls.__name__}), got {data!r}")
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in reserved}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValidationError(source, where or "<top>", f"unknown keys {unknown}; allowed: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        at = f"{where}.{name}" if where else name
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ValidationError(source, at, f"is required ({type_name(hints[name])})")
            continue
        kwargs[name] = convert(data[name], hints[name], source, at, hooks=hooks, reserved=reserved)
    try:
        return cls(**kwargs)
    except ValidationError:
        raise
    except ValueError as exc:  # a dataclass's own check: "<Class>.<field> <problem>" names the field
        head, _, problem = str(exc).partition(" ")
        owner, _, name = head.partition(".")
        if owner != cls.__name__ or name not in fields:
            raise
        raise ValidationError(source, f"{where}.{name}" if where else name, problem) from None


__all__ = ["Hook", "build", "convert", "type_name"]
