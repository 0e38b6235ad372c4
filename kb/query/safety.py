"""The read-only query path: check the exact text the engine will run, refuse what it must never do.

Oxigraph executes `SERVICE` through its own HTTP client with no switch to turn it off (DESIGN
§9), and no SPARQL parser agrees with it on every quirk: rdflib expands `\\uXXXX` escapes over
the whole text before parsing (as the SPARQL spec says), Oxigraph only inside strings and IRIs,
so `BIND("\\u0022" AS ?a) SERVICE <…> {…} BIND("\\u0022" AS ?b)` was a string to rdflib and a
federated call to Oxigraph. Hence three checks on one text, each enough to refuse:

1. **No codepoint escapes** anywhere (`\\u`, `\\U`): with none, every parser reads the same
   characters. Write the character itself.
2. **A lexical scan of our own**, independent of any parser: strings, IRIs and comments are
   blanked out by the SPARQL 1.1 terminal rules; every other word that spells SERVICE — in any
   case, inside any bare word — is refused. Names that merely contain the word are told apart
   only where the grammar leaves no doubt (variables, prefixed names, blank nodes, language
   tags); elsewhere the scan errs on the side of refusing. A `<` is not always an IRI's start:
   after a term (`?c<'>'`) Oxigraph reads it as less-than, so `FILTER(?c<'>') SERVICE <…> {…} #'`
   was an IRI and a string to a scan that read every IRIREF-shaped `<…>` as an IRI, and a
   federated call to the engine. Where both readings are possible and the `<…>` holds a
   character that would open a string or a comment (`'`, `#`), the scan follows both and
   refuses SERVICE in either.
3. **rdflib's parse tree**: no `ServiceGraphPattern`, a query (never an update), one of the
   four query forms; it also yields the dataset clause (`FROM`, `FROM NAMED`).

The text that passed is what runs: callers get a `CheckedQuery` and execute `checked.text`.
Rule files go through the same checks (`refuse_remote`).

rdflib's parse costs 0.1-0.4 s (and importing rdflib 0.1 s) against a 10 ms query, so
`check_user_query` with a `cache` folder keeps the verdict of check 3 per exact text (a SHA-256
of the text, of this module and of the rdflib installed): asking again with the same text reads
it back. Checks 1 and 2 are cheap and run every time, so no cache entry can let an escape or a
SERVICE through; a text is cached only after it passed all three.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from luma.errors import QueryError, QueryRefused
from luma.kb.vocab import PREFIXES

_KINDS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "graph", "DescribeQuery": "graph"}
_FORMS = {"SelectQuery": "select", "AskQuery": "ask", "ConstructQuery": "construct", "DescribeQuery": "describe"}
_SERVICE_REFUSED = "SERVICE (remote federation) is not allowed"

# -- SPARQL 1.1 terminals (https://www.w3.org/TR/sparql11-query/#grammar), as the spec writes them.
_PN_CHARS_BASE = (
    "A-Za-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF\u200C-\u200D"
    "\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD\U00010000-\U000EFFFF"
)
_PN_CHARS_U = _PN_CHARS_BASE + "_"
_PN_CHARS = _PN_CHARS_U + "\\-0-9\u00B7\u0300-\u036F\u203F-\u2040"
_VARNAME = f"[{_PN_CHARS_U}0-9][{_PN_CHARS_U}0-9\u00B7\u0300-\u036F\u203F-\u2040]*"
_PN_PREFIX = f"[{_PN_CHARS_BASE}](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?"
# PN_LOCAL without its PLX escapes (`%hh`, `\\.`): a name with one ends early here, so what
# follows it is scanned as code -- stricter than the engine, never looser.
_PN_LOCAL = f"[{_PN_CHARS_U}:0-9](?:[{_PN_CHARS}.:]*[{_PN_CHARS}:])?"
_NAME_TOKEN = re.compile(
    f"[?$]{_VARNAME}"  # variables
    f"|_:[{_PN_CHARS_U}0-9](?:[{_PN_CHARS}.]*[{_PN_CHARS}])?"  # blank node labels
    "|@[a-zA-Z]+(?:-[a-zA-Z0-9]+)*"  # language tags
    f"|(?:{_PN_PREFIX})?:(?:{_PN_LOCAL})?"  # prefixed names
)
_BARE_WORD = re.compile(f"[{_PN_CHARS}]+")
_IRIREF = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
_ESCAPE = re.compile(r"\\[uU]")


@dataclass(frozen=True)
class CheckedQuery:
    """A query that passed every check; `text` is exactly what may run.

    `from_graphs` / `from_named` hold the query's dataset clause (FROM / FROM NAMED IRIs), both
    None when it has none: the engine must then honour the clause instead of its own default
    dataset (kb/query/scope.py)."""

    text: str
    kind: str
    from_graphs: tuple[str, ...] | None = None
    from_named: tuple[str, ...] | None = None
    #: The query form: select, ask, construct or describe (rules must be construct).
    form: str = ""
    #: rdflib's parse tree of `text`, for a caller that translates it (rules/analysis.py) instead
    #: of parsing the same text a second time.
    tree: object = field(default=None, compare=False, repr=False)

    @property
    def has_dataset(self) -> bool:
        return self.from_graphs is not None or self.from_named is not None


def with_prefixes(sparql: str) -> str:
    """The query with LUMA's usual prefixes (luma:, id:, dim:, prov:, rdf:, rdfs:, xsd:, qudt:,
    unit:, …) declared in front, except those the query declares itself."""
    return _prefix_head(sparql) + sparql


def _prefix_head(sparql: str) -> str:
    declared = {m.lower() for m in re.findall(r"(?i)\bPREFIX\s+([A-Za-z][\w.-]*)?:", sparql)}
    # One line, so that the line numbers of syntax errors stay the user's.
    return "".join(f"PREFIX {p}: <{iri}> " for p, iri in PREFIXES.items() if p.lower() not in declared)


def check_user_query(sparql: str, source: str = "query", cache: Path | None = None) -> CheckedQuery:
    """A user's query with LUMA's prefixes declared in front, checked as a whole (the text that
    runs); positions in messages point into the user's own text. With `cache` (a folder), the
    parser's verdict on this exact text is kept there and read back next time (module docstring)."""
    if not sparql or not sparql.strip():
        raise QueryError("the query is empty", source=source)
    head = _prefix_head(sparql)
    text = head + sparql
    if cache is None:
        return check_query(text, source, offset=len(head))
    refuse_remote(text, source, offset=len(head))  # every time: the cache only spares the parse
    path = cache / f"{hashlib.sha256(json.dumps([_checker_digest(), text]).encode()).hexdigest()[:40]}.json"
    try:
        data = json.loads(path.read_text())
        return CheckedQuery(text, data["kind"], _tuple(data["from_graphs"]), _tuple(data["from_named"]),
                            form=data["form"])
    except (OSError, ValueError, KeyError, TypeError):
        pass  # absent or unreadable: parse, then keep the verdict
    checked = check_query(text, source, offset=len(head))
    data = {"kind": checked.kind, "form": checked.form, "from_graphs": checked.from_graphs,
            "from_named": checked.from_named}
    try:
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)
    except OSError:  # a read-only project still queries; it parses again next time
        pass
    return checked


def _tuple(value) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError("not a list of IRIs")
    return tuple(value)


@lru_cache(maxsize=1)
def _checker_digest() -> str:
    """What a cached verdict depends on besides the text: this module's code and the rdflib
    installed (found without importing it)."""
    parts = [Path(__file__).read_bytes()]
    for package in ("rdflib", "pyparsing"):
        spec = importlib.util.find_spec(package)
        origin = spec.origin if spec is not None else None
        if origin:
            st = os.stat(origin)
            parts.append(f"{package}:{origin}:{st.st_size}:{st.st_mtime_ns}".encode())
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def check_query(sparql: str, source: str = "query", *, offset: int = 0, first_line: int = 1) -> CheckedQuery:
    """Check a read-only query; QueryRefused (update, SERVICE, escapes) or QueryError (syntax).
    `offset`: characters in front of line 1 that the user did not write; `first_line`: the line
    of its file the text starts on (both for positions in messages)."""
    if not sparql or not sparql.strip():
        raise QueryError("the query is empty", source=source)
    refuse_remote(sparql, source, offset=offset, first_line=first_line)
    # rdflib and pyparsing (~0.1 s) load when a text is parsed, not when this module is imported
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        tree = parseQuery(sparql)
    except ParseException as exc:
        if _is_update(sparql):
            raise QueryRefused("updates (INSERT, DELETE, LOAD, CLEAR, DROP, …) are not allowed: queries and "
                               "rules only read", source=source) from None
        col = exc.col - offset if exc.lineno == 1 else exc.col
        raise QueryError(f"invalid SPARQL at line {exc.lineno + first_line - 1}, column {max(col, 1)}: {exc.msg}",
                         source=source) from None
    except RecursionError:
        raise QueryError("the query is nested too deeply", source=source) from None
    except (TypeError, ValueError) as exc:
        # rdflib's parse actions evaluate some terms as they parse (`VALUES ?x { -3.5 }` negates a
        # decimal and fails with TypeError): the check refuses what it cannot read, never guesses.
        raise QueryError(f"the query checker (rdflib's SPARQL parser) cannot read it: {str(exc).splitlines()[0][:200]} "
                         "(write a negative number as a typed literal, e.g. \"-3.5\"^^xsd:decimal)",
                         source=source) from None
    _check_prefixes(sparql, tree, source, offset, first_line)
    names = set(_node_names(tree))
    if "ServiceGraphPattern" in names:
        raise QueryRefused(_SERVICE_REFUSED, source=source)
    node = getattr(tree[1], "name", None)  # the query itself (a subquery is a SubSelect)
    if node not in _KINDS:
        raise QueryError("unsupported query form", source=source)
    default, named = _dataset_clause(tree, source)
    return CheckedQuery(sparql, _KINDS[node], default, named, form=_FORMS[node], tree=tree)


def _check_prefixes(text: str, tree, source: str, offset: int, first_line: int = 1) -> None:
    """QueryError at the first prefixed name whose prefix the query does not declare (rdflib
    parses them; the engine would stop at its own position, not the user's)."""
    declared = {decl["prefix"] if "prefix" in decl else "" for decl in tree[0] if decl.name == "PrefixDecl"}
    code = code_only(text, source, offset=offset, first_line=first_line)
    i, n = 0, len(code)
    while i < n:
        m = _NAME_TOKEN.match(code, i)
        if m and m.end() > i:
            word = m.group(0)
            if word[0] not in "?$_@" and ":" in word:
                prefix = word.split(":", 1)[0]
                if prefix not in declared:
                    line, col = _position(text, m.start(), offset, first_line)
                    known = ", ".join(f"{p}:" for p in sorted(declared)) or "none declared"
                    raise QueryError(f"invalid SPARQL at line {line}, column {col}: unknown prefix {prefix}: "
                                     f"(known: {known})", source=source)
            i = m.end()
            continue
        w = _BARE_WORD.match(code, i)
        i = w.end() if w else i + 1


def check_read_only(sparql: str, source: str = "query") -> str:
    """The query kind (select, ask, graph) of a checked query; see `check_query`."""
    return check_query(sparql, source).kind


def refuse_remote(text: str, source: str, field: str | None = None, offset: int = 0, first_line: int = 1) -> None:
    """Refuse codepoint escapes and the SERVICE keyword in a SPARQL text (query or rule body),
    by a lexical scan that does not depend on any parser's quirks."""
    m = _ESCAPE.search(text)
    if m:
        line, col = _position(text, m.start(), offset, first_line)
        raise QueryRefused(
            f"\\u/\\U escapes are not allowed (line {line}, column {col}): SPARQL engines disagree on where "
            "they apply; write the character itself", source=source, field=field)
    code = _scan(text, source, field, offset, first_line, every_reading=True)
    for at, word in _bare_words(code):
        if "service" in word.casefold():
            message = _SERVICE_REFUSED if word.casefold() == "service" else \
                f"{_SERVICE_REFUSED} (the word {word!r} contains it; write such an IRI in full, <…>)"
            if not code_only(text, source, field, offset, first_line)[at:at + len(word)].strip():
                line, col = _position(text, at, offset, first_line)
                message = (f"{_SERVICE_REFUSED} (line {line}, column {col}, where a `<` before it may be read as "
                           "less-than; after a term, write an IRI holding # or ' as a prefixed name)")
            raise QueryRefused(message, source=source, field=field)


def code_only(text: str, source: str = "query", field: str | None = None, offset: int = 0,
              first_line: int = 1) -> str:
    """`text` with every string literal, IRI and comment blanked out (same length, so positions
    stay): what remains is what the grammar reads as keywords, names, numbers and punctuation.
    Every IRIREF-shaped `<…>` is read as an IRI here (prefix checks); `refuse_remote` also scans
    the other reading of a `<` that may be less-than."""
    return _scan(text, source, field, offset, first_line, every_reading=False)


#: After one of these a term comes next, so a `<` there can only open an IRI (or `<<`).
_TERM_NEXT = frozenset("{(,;.[^=!<&|*/+")
#: Keywords after which a `<` can only open an IRI; none of them is an operand itself.
_IRI_NEXT = frozenset({"a", "base", "from", "named", "graph", "filter"})
#: Characters that open a string or a comment when an IRIREF-shaped `<…>` is read as code.
_OPENERS = ("'", "#")
_TERM, _ANY, _PREFIX = 0, 1, 2  # what may come next: a term, a term or an operator, a prefix name


def _scan(text: str, source: str, field: str | None, offset: int, first_line: int, every_reading: bool) -> str:
    """The code of `text` (see `code_only`). With `every_reading`, a `<` that may be less-than
    (after a term: a variable, literal, number, IRI, `)` …) and whose IRIREF-shaped `<…>` holds a
    string or comment opener is followed both ways; a character is code when some reading reads
    it as code. Oxigraph decides by the grammar's position, so its reading is one of these.

    Readings that meet again (same position, same expectation) are scanned once, so the cost
    stays linear. Gluing the readings' code cannot hide a word: each stretch that one reading
    blanks ends with its closer (quote, `>`, line end), never a name character."""
    n = len(text)
    out = [" "] * n
    seen: set[tuple[int, int]] = set()
    todo = [(0, _TERM)]
    main = True  # the first reading takes every IRIREF as an IRI: the grammar's own tokens
    while todo:
        i, ctx = todo.pop()
        while i < n and (i, ctx) not in seen:
            seen.add((i, ctx))
            c = text[i]
            if c == "\\":
                # Outside strings only a prefixed name's local part escapes (`ex:a\\#b`): the escaped
                # character is a name character, never a comment, string or IRI start.
                out[i:i + 2] = text[i:i + 2]
                i, ctx = i + 2, _ANY
            elif c == "#":
                i = _line_end(text, i)
            elif c in "\"'":
                end = _string_end(text, i)
                if end is None:
                    if main:
                        line, col = _position(text, i, offset, first_line)
                        raise QueryError(f"unterminated string literal at line {line}, column {col}",
                                         source=source, field=field)
                    break  # a syntax error in this reading: the engine runs nothing read this way
                i, ctx = end, _ANY
            elif c == "<" and (m := _IRIREF.match(text, i)):
                if every_reading and ctx != _TERM and any(o in m.group() for o in _OPENERS):
                    out[i] = c
                    todo.append((i + 1, _TERM))  # the less-than reading: a term follows it
                i, ctx = m.end(), _ANY
            elif c.isspace():
                out[i] = c
                i += 1
            elif w := _word_at(text, i):
                out[i:i + len(w)] = w
                word = w.casefold()
                ctx = (_TERM if word in _IRI_NEXT or (ctx == _PREFIX and word.endswith(":"))
                       else _PREFIX if word == "prefix" else _ANY)
                i += len(w)
            else:
                out[i] = c
                ctx = _TERM if c in _TERM_NEXT else _ANY
                i += 1
        main = False
    return "".join(out)


def _word_at(text: str, i: int) -> str:
    """The name token (variable, prefixed name, blank node, language tag) or bare word at `i`."""
    m = _NAME_TOKEN.match(text, i)
    if m and m.end() > i:
        return m.group(0)
    w = _BARE_WORD.match(text, i)
    return w.group(0) if w else ""


def _line_end(text: str, i: int) -> int:
    m = re.compile(r"[\n\r]").search(text, i)
    return m.start() if m else len(text)


def _string_end(text: str, i: int) -> int | None:
    """End (exclusive) of the string literal opening at i: STRING_LITERAL1/2 and their LONG forms,
    with ECHAR escapes; None when it is not terminated."""
    q = text[i]
    long_form = text.startswith(q * 3, i)
    j = i + (3 if long_form else 1)
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if long_form:
            if text.startswith(q * 3, j):
                return j + 3  # the first triple quote ends it (the spec's rule)
        elif c == q:
            return j + 1
        elif c in "\n\r":
            break
        j += 1
    return None


def _bare_words(code: str):
    """(position, word) of the words of `code` that are not variables, prefixed names, blank nodes
    or language tags."""
    i, n = 0, len(code)
    while i < n:
        m = _NAME_TOKEN.match(code, i)
        if m and m.end() > i:
            i = m.end()
            continue
        w = _BARE_WORD.match(code, i)
        if w:
            yield i, w.group(0)
            i = w.end()
        else:
            i += 1


def _position(text: str, index: int, offset: int = 0, first_line: int = 1) -> tuple[int, int]:
    """Line and column of `index`; `offset` characters of line 1 are not the user's, and the
    text's first line is line `first_line` of its file (a rule body after its header)."""
    line = text.count("\n", 0, index) + 1
    col = index - (text.rfind("\n", 0, index) + 1) + 1
    return line + first_line - 1, col - offset if line == 1 else col


def _dataset_clause(tree, source: str) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """FROM and FROM NAMED IRIs of a parsed query, prefixed names resolved (None, None without a
    dataset clause)."""
    if not any(node.name == "DatasetClause" for node in _nodes(tree)):
        return None, None
    from rdflib.plugins.sparql.algebra import translateQuery

    try:
        clauses = translateQuery(tree).algebra.get("datasetClause") or []
    except Exception as exc:  # noqa: BLE001 - rdflib raises plain Exceptions for unknown prefixes
        raise QueryError(f"cannot resolve the dataset clause (FROM): {str(exc).splitlines()[0][:200]}",
                         source=source) from None
    default = tuple(str(c["default"]) for c in clauses if "default" in c)
    named = tuple(str(c["named"]) for c in clauses if "named" in c)
    return default, named


def _is_update(sparql: str) -> bool:
    from pyparsing import ParseException
    from rdflib.plugins.sparql.parser import parseUpdate

    try:
        parseUpdate(sparql)
    except (ParseException, RecursionError):
        return False
    return True


def _nodes(node):
    """Every CompValue of rdflib's parse tree `node`, depth first."""
    from pyparsing import ParseResults
    from rdflib.plugins.sparql.parserutils import CompValue

    def walk(n):
        if isinstance(n, CompValue):
            yield n
            for value in n.values():
                yield from walk(value)
        elif isinstance(n, (list, tuple, ParseResults)):
            for value in n:
                yield from walk(value)

    return walk(node)


def _node_names(node):
    return (n.name for n in _nodes(node))
