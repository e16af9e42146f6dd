"""YAML and JSON read safely: the one way Steplab parses what a user, a file or a form sent.

PyYAML's ``safe_load`` builds no Python objects, but it still expands aliases: a 544-byte
document of nested ``*a`` references stands for billions of values, and whatever walks the
result (validation, JSON, a page) runs out of memory. Here, before anything is constructed:

- aliases may add at most :data:`MAX_ALIAS_EXPANSION` values and characters to the document
  (``<<: *defaults`` and a few repeated blocks are fine; an alias bomb is refused), and an
  alias may not refer to the node that contains it;
- nesting is at most :data:`MAX_DEPTH` deep, counted with aliases expanded;
- the values are the ones JSON has: dates and timestamps stay text (so an out-of-range date
  cannot reach a database column), ``!!binary``, ``!!set``, ``!!omap`` and ``!!pairs`` are
  refused, and an integer too long to convert is refused instead of crashing.

Every refusal is a :class:`UnsafeYAMLError`, a ``yaml.YAMLError`` (callers' existing handlers
catch it) whose message says what is wrong, where, and what to do.

JSON has no aliases, but Python's reader still fails two ways that are not ``JSONDecodeError``:
nesting deeper than the interpreter's recursion limit (``RecursionError``) and an integer of
more than 4,300 digits (``ValueError``). :func:`load_json` turns both into a
``json.JSONDecodeError`` with a message, so a form or a file shows it instead of failing."""

from __future__ import annotations

import json
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "UnsafeYAMLError",
    "compose_yaml",
    "load_json",
    "load_yaml",
    "load_yaml_with_node",
]

MAX_ALIAS_EXPANSION = 100_000  # values + characters that aliases may add to a document
MAX_DEPTH = 100  # nested mappings and lists, aliases expanded
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_REFUSED_TAGS = {
    "tag:yaml.org,2002:binary": "!!binary",
    "tag:yaml.org,2002:set": "!!set",
    "tag:yaml.org,2002:omap": "!!omap",
    "tag:yaml.org,2002:pairs": "!!pairs",
}


class UnsafeYAMLError(ComposerError):
    """A YAML document refused before it was built (alias bomb, recursion, nesting, tag)."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that counts what aliases expand to before building anything."""

    # Dates and timestamps stay strings (YAML 1.2 and JSON have no such type).
    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _TIMESTAMP]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._depth = 0
        self._first_alias: yaml.Mark | None = None

    def compose_node(self, parent: Any, index: Any) -> yaml.Node:
        if self.check_event(AliasEvent):
            if self._first_alias is None:
                self._first_alias = self.peek_event().start_mark
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise UnsafeYAMLError(
                    None,
                    None,
                    f"the YAML is nested more than {MAX_DEPTH} levels deep; flatten it",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> yaml.Node:
        node = super().compose_document()
        if self._first_alias is not None:
            _check_expansion(node, self._first_alias)
        return node

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            raise ConstructorError(
                None,
                None,
                f"a number of {len(node.value)} characters is too long to read; "
                "quote it to keep it as text",
                node.start_mark,
            ) from None

    def construct_refused(self, node: yaml.Node) -> None:
        shown = _REFUSED_TAGS.get(node.tag, node.tag)
        raise ConstructorError(
            None,
            None,
            f"the tag {shown} is not supported: use plain text, lists and mappings",
            node.start_mark,
        )


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor(_TIMESTAMP, _Loader.construct_yaml_str)
for _tag in _REFUSED_TAGS:
    _Loader.add_constructor(_tag, _Loader.construct_refused)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _own_weight(node: yaml.Node) -> int:
    return 1 + (len(node.value) if isinstance(node, yaml.ScalarNode) else 0)


def _check_expansion(root: yaml.Node, mark: yaml.Mark) -> None:
    """Refuse a node graph whose aliases expand it by more than MAX_ALIAS_EXPANSION, that
    contains itself, or that is more than MAX_DEPTH deep once expanded. Linear in the number
    of distinct nodes: each is measured once (weight and depth with aliases expanded)."""
    measured: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            sizes = [measured[id(child)] for child in _children(node)]
            weight = _own_weight(node) + sum(size for size, _ in sizes)
            scalar = isinstance(node, yaml.ScalarNode)
            depth = 0 if scalar else 1 + max((d for _, d in sizes), default=0)
            measured[key] = (weight, depth)
            open_nodes.discard(key)
            distinct += _own_weight(node)
            continue
        if key in measured:
            continue
        if key in open_nodes:
            raise UnsafeYAMLError(
                None, None, "an alias refers to the node that contains it; remove the loop", mark
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in measured)
    weight, depth = measured[id(root)]
    if weight - distinct > MAX_ALIAS_EXPANSION:
        raise UnsafeYAMLError(
            None,
            None,
            f"the YAML's aliases (*name) would expand it by {weight - distinct:,} values and "
            f"characters, more than the {MAX_ALIAS_EXPANSION:,} allowed (an alias bomb?); "
            "write the repeated values out, or use fewer aliases",
            mark,
        )
    if depth > MAX_DEPTH:
        raise UnsafeYAMLError(
            None,
            None,
            f"with its aliases expanded the YAML is nested {depth} levels deep, more than "
            f"{MAX_DEPTH}; flatten it",
            mark,
        )


def load_yaml(text: str | bytes) -> Any:
    """The one YAML document in ``text`` (None when empty), read as described above; raises a
    ``yaml.YAMLError`` (an :class:`UnsafeYAMLError` for what is refused on purpose)."""
    return load_yaml_with_node(text)[0]


def load_yaml_with_node(text: str | bytes) -> tuple[Any, yaml.Node | None]:
    """(data, node): the document and its node tree (for line numbers), from one parse."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
        return data, node
    finally:
        loader.dispose()


def compose_yaml(text: str | bytes) -> yaml.Node | None:
    """The node tree of the one document in ``text`` (checked as :func:`load_yaml` checks it)."""
    loader = _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def load_json(text: str | bytes, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; nesting too deep to read and integers too long to convert
    raise ``json.JSONDecodeError`` (with a message saying so) like any other invalid JSON."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        reason = "nested too deeply to read (hundreds of levels of objects or lists); flatten it"
    except ValueError as exc:  # int() of more digits than Python converts
        reason = f"a number too long to read ({exc}); quote it to keep it as text"
    raise json.JSONDecodeError(reason, text if isinstance(text, str) else "", 0) from None
