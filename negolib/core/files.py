"""Reading and writing files: strict YAML in, and no half-written file out.

Whole-file writes go through a synced temporary file renamed into place
(:func:`atomic_write_text`); line-oriented logs grow by :func:`locked_append`: an exclusive
``flock``, a torn last line left by a crash dropped first, one whole write, then ``fsync``.
Every YAML file negolib reads (profiles, domains, the paper's numbers, protocols) goes through
:func:`load_yaml`: a key given twice or bad YAML is a :class:`~negolib.core.errors.ValidationError`.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import yaml

from negolib.core.errors import ValidationError


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a synced temporary file renamed into place: readers see the
    old content or the new, never a torn file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def drop_partial_tail(fd: int) -> None:
    """Truncate a half-written last line left by a crash (caller holds the lock)."""
    size = os.lseek(fd, 0, os.SEEK_END)
    if size == 0:
        return
    if os.pread(fd, 1, size - 1) == b"\n":
        return
    pos, chunk = size, 4096
    while pos > 0:
        start = max(0, pos - chunk)
        buf = os.pread(fd, pos - start, start)
        nl = buf.rfind(b"\n")
        if nl >= 0:
            os.ftruncate(fd, start + nl + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


def locked_append(path: str | Path, data: bytes) -> None:
    """Append ``data`` (whole lines) to ``path`` under an exclusive ``flock``: a torn last line is
    truncated first (so nothing is glued onto it), then one write loop and ``fsync``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        drop_partial_tail(fd)
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class StrictLoader(yaml.SafeLoader):
    """A YAML ``SafeLoader`` whose mapping constructor rejects a key given twice in one mapping.

    PyYAML keeps the last value silently (a second ``seed:`` would win); here it is a
    :class:`DuplicateKeyError` naming the dotted path of the key and both line numbers. Merge keys
    (``<<: *anchor``) may still be overridden, as YAML intends.
    """

    def construct_document(self, node: yaml.Node) -> Any:
        self._paths: dict[int, str] = {}
        self._index(node, "")
        return super().construct_document(node)

    def _index(self, node: yaml.Node, path: str) -> None:
        """Record the dotted path of every mapping node (for error messages)."""
        if id(node) in self._paths:  # an alias met again
            return
        self._paths[id(node)] = path
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else "?"
                self._index(v, f"{path}.{key}" if path else str(key))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._index(v, f"{path}[{i}]")

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
            try:
                seen = key in first
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if seen:
                base = getattr(self, "_paths", {}).get(id(node), "")
                raise DuplicateKeyError(f"{base}.{key}" if base else str(key), first[key], line)
            first[key] = line
        return super().construct_mapping(node, deep=deep)


class DuplicateKeyError(yaml.YAMLError):
    """A mapping key given twice (raised by :class:`StrictLoader`)."""

    def __init__(self, path: str, first_line: int, line: int) -> None:
        self.path, self.first_line, self.line = path, first_line, line
        super().__init__(f"{path}: key given twice, at line {first_line} and line {line}")


def load_yaml(path: str | Path) -> Any:
    """A YAML file loaded with :class:`StrictLoader`; a duplicate key or bad YAML is a
    :class:`ValidationError` naming the file, the dotted key and the line(s)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(str(path), "<file>", f"is not UTF-8 text: {exc}") from exc
    try:
        return yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise ValidationError(str(path), exc.path, f"key given twice, at line {exc.first_line} and line "
                              f"{exc.line} (YAML would silently keep the last)") from exc
    except yaml.YAMLError as exc:
        raise ValidationError(str(path), "<yaml>", f"not valid YAML: {exc}") from exc


def merge_overrides(base: Any, override: Any) -> Any:
    """``override`` laid over ``base``: mappings merge key by key (recursively); any other value, a list
    included, replaces the base's."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = merge_overrides(base[key], value) if key in base else value
        return out
    return override


def load_yaml_extending(path: str | Path, key: str = "extends", _chain: tuple[Path, ...] = ()) -> Any:
    """:func:`load_yaml`, where a top-level ``extends: other.yaml`` (relative to the file) loads that file
    first and lays this one over it with :func:`merge_overrides`. Chains are followed; a cycle, a missing
    base or a non-string value is a :class:`ValidationError` naming the file and the field."""
    path = Path(path).resolve()
    data = load_yaml(path)
    if not isinstance(data, dict) or key not in data:
        return data
    parent = data.pop(key)
    if not isinstance(parent, str) or not parent:
        raise ValidationError(str(path), key, f"must name a profile file, got {parent!r}")
    base_path = (path.parent / parent).resolve()
    if base_path == path or base_path in _chain:
        raise ValidationError(str(path), key, f"{parent!r} extends itself (a cycle through {base_path.name})")
    if not base_path.is_file():
        raise ValidationError(str(path), key, f"{parent!r} does not exist (looked for {base_path})")
    base = load_yaml_extending(base_path, key, (*_chain, path))
    if not isinstance(base, dict):
        raise ValidationError(str(base_path), "<file>", "must be a mapping to be extended")
    return merge_overrides(base, data)


__all__ = ["DuplicateKeyError", "StrictLoader", "atomic_write_text", "drop_partial_tail", "load_yaml",
           "load_yaml_extending", "locked_append", "merge_overrides"]
