"""YAML record files read by the YAML 1.2 core schema, without anchors, aliases or duplicate keys.

PyYAML resolves plain scalars by YAML 1.1: `1:30` is 90 (base 60), `yes` / `on` / `no` / `off`
are booleans, `2025-01-02` is a date. In a record a value means what YAML 1.2 says: only
`true` / `false`, null, decimal / `0o` / `0x` integers and floats (`.inf`, `.nan` too) are
resolved; everything else plain stays a string. Anchors and aliases are refused (nine kB of
aliased trials expand to a million quads), and so are duplicate keys (PyYAML keeps the last one
silently). The C parser is used when PyYAML has it: resolution and construction are Python-level
either way.
"""

from __future__ import annotations

import collections.abc
import math
import re
import sys

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, SequenceNode

_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TAG = "tag:yaml.org,2002:"


class DuplicateKey(ConstructorError):
    """A mapping states one key twice; `mapping` is its node, `key` the key."""

    def __init__(self, mapping: MappingNode, key, mark):
        super().__init__(None, None, f"duplicate key {key!r}", mark)
        self.mapping, self.key = mapping, key


class Ambiguous(ConstructorError):
    """A plain scalar that YAML 1.1 and 1.2 read differently (`yes`, `1:30`, `012`, `2e16739`)."""

    def __init__(self, node: Node, old: str, new: str):
        super().__init__(None, None, f"{node.value[:40]!r} is {_WORDS.get(new, new)} in YAML 1.2 but "
                         f"{_WORDS.get(old, old)} in YAML 1.1: quote it", node.start_mark)
        self.node = node


_AMBIGUOUS = "tag:luma,2026:ambiguous"
_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+\Z")
_WORDS = {f"tag:yaml.org,2002:{k}": w for k, w in (("str", "a string"), ("bool", "a boolean"), ("int", "an integer"),
                                                      ("float", "a number"), ("null", "null"),
                                                      ("timestamp", "a date"), ("merge", "a merge key"),
                                                      ("value", "a value key"))} | {"octal": "an octal integer"}
#: PyYAML's own YAML 1.1 rules: what a writer that follows them (PyYAML's safe_dump, most Python
#: code) meant by a plain scalar it left unquoted.
_YAML_1_1 = yaml.resolver.Resolver()


class CoreLoader(_BASE):
    """PyYAML's safe loader with the YAML 1.2 core schema's resolvers and constructors only.

    A plain scalar that YAML 1.1 reads otherwise is refused rather than guessed: `recovered: yes`
    (1.1: true), `repetitions: 1:30` (1.1: 90), but also a git revision `2e16739` that a 1.1
    writer such as PyYAML's safe_dump leaves unquoted and 1.2 reads as a float."""

    yaml_implicit_resolvers: dict = {}
    yaml_constructors: dict = {}
    yaml_multi_constructors: dict = {}

    def resolve(self, kind, value, implicit):
        tag = super().resolve(kind, value, implicit)
        if kind is yaml.ScalarNode and implicit[0]:
            old = _YAML_1_1.resolve(kind, value, implicit)
            if old != tag:
                return f"{_AMBIGUOUS}:{old}|{tag}"
            if tag == _TAG + "int" and _LEADING_ZERO.match(value):  # 1.1: octal; 1.2: decimal
                return f"{_AMBIGUOUS}:octal|{tag}"
        return tag

    def construct_mapping(self, node, deep=False):
        # No `<<` merge keys (YAML 1.1 only) and no duplicate keys.
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        mapping = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, collections.abc.Hashable):
                raise ConstructorError("while constructing a mapping", node.start_mark, "found unhashable key",
                                       key_node.start_mark)
            if key in mapping:
                raise DuplicateKey(node, key, key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping

    def construct_core_bool(self, node):
        text = self.construct_scalar(node)
        if text.lower() not in ("true", "false"):  # an explicit `!!bool yes`
            raise ConstructorError(None, None, f"not a boolean: {text[:40]!r}", node.start_mark)
        return text.lower() == "true"

    def construct_core_int(self, node):
        text = self.construct_scalar(node)
        try:
            if text.startswith(("0o", "0x")):
                return int(text[2:], 8 if text[1] == "o" else 16)
            return int(text)
        except ValueError:  # more digits than Python converts, or an explicit `!!int` on something else
            digits = sys.get_int_max_str_digits()
            problem = (f"an integer has more than {digits} digits" if len(text) > digits
                       else f"not an integer: {text[:40]!r}")
            raise ConstructorError(None, None, problem, node.start_mark) from None

    def construct_core_float(self, node):
        text = self.construct_scalar(node)
        low = text.lower()
        if low in (".inf", "+.inf", "-.inf"):
            return -math.inf if low[0] == "-" else math.inf
        if low == ".nan":
            return math.nan
        try:
            return float(text)
        except ValueError:  # an explicit `!!float` on something else (`!!float 1:30`)
            raise ConstructorError(None, None, f"not a number: {text[:40]!r}", node.start_mark) from None


# The core schema (YAML 1.2.2, section 10.3.2), in the order PyYAML tries them: int before float.
_RESOLVERS = [
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("bool", r"true|True|TRUE|false|False|FALSE", list("tTfF")),
    ("int", r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+", list("-+0123456789")),
    ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
     list("-+.0123456789")),
]
for _name, _pattern, _first in _RESOLVERS:
    CoreLoader.add_implicit_resolver(_TAG + _name, re.compile(rf"(?:{_pattern})\Z"), _first)
for _name, _construct in [("null", SafeConstructor.construct_yaml_null), ("bool", CoreLoader.construct_core_bool),
                          ("int", CoreLoader.construct_core_int), ("float", CoreLoader.construct_core_float),
                          ("str", SafeConstructor.construct_yaml_str), ("seq", SafeConstructor.construct_yaml_seq),
                          ("map", SafeConstructor.construct_yaml_map)]:
    CoreLoader.add_constructor(_TAG + _name, _construct)


def _construct_ambiguous(loader, suffix, node):
    old, new = suffix.lstrip(":").split("|", 1)
    raise Ambiguous(node, old, new)


CoreLoader.add_multi_constructor(_AMBIGUOUS, _construct_ambiguous)
# Any other tag (`!!timestamp`, `!!binary`, `!!set`, a local `!tag`): "could not determine a constructor".
CoreLoader.add_constructor(None, SafeConstructor.construct_undefined)


def compose_all(text: str) -> list[Node]:
    """The node tree of each document of `text`; yaml.YAMLError on bad syntax or an anchor / alias."""
    # Every anchor and alias starts with `&` / `*`: text without either needs no event scan.
    if "&" in text or "*" in text:
        _refuse_anchors(text)
    loader = CoreLoader(text)
    try:
        nodes = []
        while loader.check_node():
            nodes.append(loader.get_node())
        return nodes
    finally:
        loader.dispose()


def construct(node: Node):
    """The Python value of one document's node tree (DuplicateKey on a repeated key)."""
    loader = CoreLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def too_deep(node: Node, max_depth: int) -> MarkedYAMLError | None:
    """An error marking the first collection nested deeper than `max_depth`, or None."""
    stack = [(node, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, SequenceNode):
            children = node.value
        else:
            continue
        if depth > max_depth:
            return MarkedYAMLError(None, None, f"nested deeper than {max_depth} levels", node.start_mark)
        stack.extend((child, depth + 1) for child in children)
    return None


def path_to(root: Node, target: Node) -> tuple:
    """The keys and indexes that lead from `root` to the node `target` (for error messages)."""
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, MappingNode):
            stack.extend((value, path + (getattr(key, "value", "?"),)) for key, value in node.value)
        elif isinstance(node, SequenceNode):
            stack.extend((child, path + (i,)) for i, child in enumerate(node.value))
    return ()


def _refuse_anchors(text: str) -> None:
    loader = CoreLoader(text)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise MarkedYAMLError(None, None, "anchors and aliases (&name, *name) are not accepted",
                                      event.start_mark)
    finally:
        loader.dispose()


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """PyYAML writes by YAML 1.1 and leaves `2e16739` or `1:30` unquoted where LUMA's YAML 1.2
    reader would take them for numbers (or refuse them): quote every string that either version
    reads as anything but a string."""


def _represent_str(dumper, value: str):
    loader = CoreLoader("")
    try:
        plain = loader.resolve(yaml.ScalarNode, value, (True, False)) == "tag:yaml.org,2002:str"
    finally:
        loader.dispose()
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=None if plain else '"')


_Dumper.add_representer(str, _represent_str)


def dump(data) -> str:
    """YAML text of `data` that this module's reader reads back as the same data (keys in order)."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True)
