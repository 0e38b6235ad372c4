"""Parsing untrusted record text (JSON, a JSON Lines line, YAML, TOML) into plain documents.

Beyond the syntax of each format, a document may nest at most MAX_DEPTH levels (a record nests
five or six; a parser recursing a thousand levels down ends in RecursionError) and may not state
a key twice in one object (JSON and YAML parsers keep the last one silently; TOML refuses it
itself). Errors are RecordErrors naming the file, the record and the key path, e.g.
`a.json: contract.clauses[0]: duplicate key 'unit'` or `b.jsonl: line 7: nested deeper than
64 levels`.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from typing import Any

import yaml

from luma.errors import LumaError, RecordError
from luma.kb.records import yaml_core

#: Deepest nesting of objects and arrays a record file may hold (a record needs about six).
MAX_DEPTH = 64


class _Duplicate(Exception):
    pass


def _unique_pairs(pairs: list) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Duplicate
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_unique_pairs)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SAME_BRACKETS = str.maketrans("[]", "{}")


def parse_json(text: str, source: str, lineno: int | None = None) -> Any:
    """One JSON document (`lineno`: the line of a JSON Lines file it is)."""
    name = f"{source}: line {lineno}" if lineno else source
    try:
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"invalid JSON: line {lineno or exc.lineno}, column {exc.colno}: {exc.msg}",
                          source=source) from None
    except _Duplicate:
        _raise_duplicate(text, name, lineno is None)
    except RecursionError:
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", source=name) from None
    except ValueError:  # an integer longer than Python converts (the only other ValueError)
        raise RecordError(f"invalid JSON: an integer has more than {sys.get_int_max_str_digits()} digits",
                          source=name) from None
    if not _json_depth_ok(text):
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", source=name)
    return doc


def _json_depth_ok(text: str) -> bool:
    """Whether the parsed JSON `text` nests at most MAX_DEPTH levels (exact for valid JSON)."""
    # Depth can only exceed the number of opening brackets: a JSON Lines record has about 25.
    if text.count("{") + text.count("[") <= MAX_DEPTH:
        return True
    # Outside strings only: in valid JSON every escape is two characters, so dropping the
    # escaped backslashes, then the escaped quotes, leaves quotes that all delimit strings, and
    # every other piece between them lies outside one. C-speed passes: about half the time of
    # matching each string with a pattern (33-37 against 47-73 us for a 100k-bench record).
    outside = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])
    nest = _NOT_BRACKET.sub("", outside).translate(_SAME_BRACKETS)
    for _ in range(MAX_DEPTH):  # each pass removes the innermost pairs: one level
        if not nest:
            return True
        nest = nest.replace("{}", "")
    return not nest


class _Pairs(list):
    """An object's (key, value) pairs, in order, duplicates kept."""


def _raise_duplicate(text: str, name: str, whole_file: bool):
    # The fast parse only said "some object repeats a key"; find which, and where, slowly.
    try:
        root = json.loads(text, object_pairs_hook=_Pairs)
    except RecursionError:
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", source=name) from None
    stack = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen = set()
            for key, _ in node:
                if key in seen:
                    in_list = whole_file and type(root) is list  # a list of records, not an object's _Pairs
                    source, field = _locate(name, path, in_list, in_list and len(root) > 1)
                    raise RecordError(f"duplicate key {key!r}", source=source, field=field) from None
                seen.add(key)
            stack.extend((value, path + (key,)) for key, value in reversed(node))
        elif isinstance(node, list):
            stack.extend((value, path + (i,)) for i, value in reversed(list(enumerate(node))))
    raise RecordError("duplicate key", source=name) from None  # not reached: the fast parse found one


def _locate(source: str, path: tuple, in_list: bool = False, many: bool = False,
            before: int = 0) -> tuple[str, str | None]:
    """(source, field) for the key path `path` into a document: `a.json: record 2` and
    `contract.clauses[0]`. `in_list`: the document is a list of records; `many`: the file holds
    more than one record, `before` of them in earlier documents."""
    if in_list and path:
        before, path = before + path[0], path[1:]
    if many:
        source = f"{source}: record {before + 1}"
    field = ""
    for part in path:
        field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
    return source, field or None


def parse_yaml(text: str, source: str) -> list:
    """The documents of a YAML file (YAML 1.2 core schema, no anchors, aliases or duplicate keys)."""
    try:
        nodes = yaml_core.compose_all(text)
        for node in nodes:
            problem = yaml_core.too_deep(node, MAX_DEPTH)
            if problem:
                raise problem
        docs = []
        for i, node in enumerate(nodes):
            try:
                docs.append(yaml_core.construct(node))
            except yaml_core.DuplicateKey as exc:
                _raise_yaml_duplicate(exc, source, nodes, i)
            except yaml_core.Ambiguous as exc:
                where, field = _locate(source, yaml_core.path_to(node, exc.node), *_numbering(nodes, i))
                raise RecordError(f"{exc.problem} (line {exc.problem_mark.line + 1})", source=where,
                                  field=field) from None
        return docs
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (it has no line mark)
        raise RecordError(f"invalid YAML: {exc.reason} (character {exc.position + 1})", source=source) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise RecordError(f"invalid YAML: {where}{getattr(exc, 'problem', exc)}", source=source) from None
    except RecursionError:  # the pure-Python parser, where PyYAML lacks the C one
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels", source=source) from None


def _numbering(nodes: list, i: int) -> tuple[bool, bool, int]:
    """(document i is a list of records, the file holds several records, records before it):
    records are numbered across documents, as read_documents numbers them."""
    sizes = [len(n.value) if isinstance(n, yaml.SequenceNode) else int(n.tag != "tag:yaml.org,2002:null")
             for n in nodes]
    return isinstance(nodes[i], yaml.SequenceNode), sum(sizes) > 1, sum(sizes[:i])


def _raise_yaml_duplicate(exc: yaml_core.DuplicateKey, source: str, nodes: list, i: int):
    path = yaml_core.path_to(nodes[i], exc.mapping)
    where, field = _locate(source, path, *_numbering(nodes, i))
    line = exc.problem_mark.line + 1
    raise RecordError(f"duplicate key {exc.key!r} (line {line})", source=where, field=field) from None


def parse_toml(text: str, source: str, error: type[LumaError] = RecordError, invalid: str = "invalid TOML") -> dict:
    """A TOML document (TOML refuses duplicate keys itself); `invalid` begins a syntax error's message."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{invalid}: {exc}", source=source) from None
    except RecursionError:
        raise error(f"nested deeper than {MAX_DEPTH} levels", source=source) from None
    except ValueError:  # an integer longer than Python converts
        raise error(f"{invalid}: an integer has more than {sys.get_int_max_str_digits()} digits",
                    source=source) from None
    if _too_deep(doc):
        raise error(f"nested deeper than {MAX_DEPTH} levels", source=source)
    return doc


def _too_deep(doc: Any) -> bool:
    """True when a table or array of `doc` is nested deeper than MAX_DEPTH."""
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
