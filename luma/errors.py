"""The one error hierarchy of LUMA.

Every error names what is at fault (a file, a field, a query) so that the CLI can print one
line and exit non-zero without a traceback. Every exception LUMA raises on purpose is defined
here, one leaf per kind of fault (tests/test_library_errors.py keeps it so). The CLI exits with
the error's `exit_code`: 1, a failure; 2, a usage mistake (the caller named what does not exist,
or gave a parameter no rule declares), as click exits for a bad option:

    LumaError                 base: `one_line()`, exit code 1
        ConfigError           a setting (environment variable, URL, project directory, size) is invalid
            ContractError     an experiment's description (contract, space, matrix, campaign, trace,
                              sprint or pilot options, model table) is invalid or names the unknown
                UnknownContract   a contract reference is neither a file nor a shipped contract
                              (also an UnknownName: exit code 2)
            StateError        a machine state (a dimension and its level) is malformed or not enforceable
            HardwareError     a machine description is invalid, or this host lacks the hardware asked for
                CharacterizeError   a measurement of this host failed
            TrustError        a runner key is missing, unreadable, untrusted or revoked
        RecordError           an ingested record (file, JSON/YAML, schema, shape) is invalid
        UnitProblem           a unit does not parse or does not fit (also a ValueError)
            UnitSyntaxError   unit text outside the unit grammar
        RdfSyntaxError        plain RDF given to `luma kb load` does not parse
        QueryError            a SPARQL query is malformed or failed
            QueryRefused      a query asks for what the read-only path never does
            QueryTimeout      a query ran longer than its time-out
        StoreError            the knowledge-base store failed or answered incompletely
            StoreBusy         the embedded KB is held by another luma process
        LedgerError           the evidence ledger refused or failed an operation
        RuleError             a rule file, a rule parameter or the rule graph is invalid
            BadParam          a parameter override no rule declares, or of the wrong type (exit code 2)
                BelowFloor    a parameter value below its rule's floor outside an exploratory run
        RulesNotRun           a reader of derived facts found none: the rules have not run
        NothingToReport       the KB holds nothing a report could be made of
        NotPriced             a machine state cannot be priced with the price table
        EngineError           a serving engine cannot serve a state
            LaunchError       the server did not come up (also a RuntimeError)
            KVBudgetError     the KV-cache level buys no token at all (also a ValueError)
            CapacityError     a request does not fit the state at all (also a RuntimeError)
        PilotError            the pilot's serving or control socket failed
            StateFailed       a library state's server did not start
            BadRequest        a malformed or unauthorised control-socket line
            UnsafeSocketFolder  the control socket's folder is not private
        UnknownName           a named thing (named query, machine, contract, backend scheme, format)
                              does not exist (exit code 2; 1 when a file the user gave names it)
        HostContended         a sprint's trial stayed contended: the sprint stops, no chain
        TensorError           a tensor or quantisation setting given to a kernel is invalid
        MissingExtra          an optional extra of the install is not there
        Interrupted           Ctrl-C stopped the command; says what it kept (exit code 130)

Leaves that were once a ValueError or RuntimeError stay one too, so a caller that catches the
built-in type still does. Three private parse signals stay outside the tree, beside the parser
that raises and catches them: kb/records/yaml_core.py's DuplicateKey and Ambiguous must be
PyYAML ConstructorErrors, kb/records/documents.py's _Duplicate escapes json's hook; each becomes
a RecordError before it leaves its module.
"""

from __future__ import annotations


class LumaError(Exception):
    """Base of every error LUMA raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.message = message
        self.source = source
        self.field = field
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """The message as the CLI prints it: `source: field: message`, on one line whatever a
        library below put into it (a file name or a parser's message may hold line breaks)."""
        parts = [p for p in (self.source, self.field) if p]
        prefix = ": ".join(parts)
        text = f"{prefix}: {self.message}" if prefix else str(self.message)
        return " ".join(text.split()) if "\n" in text or "\r" in text else text

    def lines(self) -> list[str]:
        """The message as the CLI prints it, a line each: `one_line()` (a RecordError with several
        problems says how many, then one line per problem)."""
        return [self.one_line()]


class ConfigError(LumaError):
    """A setting (environment variable, URL, project directory) is invalid."""


class ContractError(ConfigError):
    """An experiment's description (a contract, space, matrix, campaign, trace, model table, the
    options of a sprint or a pilot) is invalid or names something unknown."""


class StateError(ConfigError):
    """A machine state (a dimension and its level) is malformed, unknown or not enforceable here."""


class HardwareError(ConfigError):
    """A machine description is invalid, or this host lacks the hardware asked for (a GPU, cores,
    memory, an instruction set)."""


class CharacterizeError(HardwareError):
    """A measurement of this host failed (a probe crashed, timed out or returned nothing)."""


class TrustError(ConfigError):
    """A runner key is missing, unreadable, not trusted by this project or revoked."""


class RecordError(LumaError):
    """An ingested record (file, JSON/YAML, schema, unit, shape) is invalid. One error may carry
    every problem of the record (`problems`, from `RecordError.of`): its `field` and `message`
    are then the first problem's, so a caller that reads one still reads the first."""

    #: Lines the CLI prints at most for one record (the rest are counted).
    SHOWN = 50

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None,
                 problems: tuple = ()):
        self.problems: tuple[RecordError, ...] = tuple(problems)
        super().__init__(message, source=source, field=field)

    @classmethod
    def of(cls, problems, source: str | None = None) -> "RecordError":
        """One error for the RecordErrors `problems` of one record (flattened, in order, repeats
        dropped): the single problem itself, or an error carrying them all."""
        flat: list[RecordError] = []
        for p in problems:
            for q in p.problems or (p,):
                if all((q.field, q.message) != (f.field, f.message) for f in flat):
                    flat.append(q)
        if len(flat) == 1:
            return flat[0]
        first = flat[0]
        return cls(first.message, source=source if source is not None else first.source, field=first.field,
                   problems=tuple(flat))

    def one_line(self) -> str:
        if len(self.problems) < 2:
            return super().one_line()
        head = f"{self.source}: " if self.source else ""
        return " ".join(f"{head}{len(self.problems)} problems: {'; '.join(_problem(p) for p in self.problems)}".split())

    def lines(self) -> list[str]:
        if len(self.problems) < 2:
            return super().lines()
        head = f"{self.source}: " if self.source else ""
        shown = [f"  {' '.join(_problem(p).split())}" for p in self.problems[:self.SHOWN]]
        more = len(self.problems) - len(shown)
        return [f"{head}{len(self.problems)} problems:", *shown, *([f"  … and {more} more"] if more else [])]


def _problem(p: LumaError) -> str:
    return f"{p.field}: {p.message}" if p.field else str(p.message)


class UnitProblem(LumaError, ValueError):
    """A unit does not parse or does not fit; the caller adds the field name (kb/records/units.py). Still a
    ValueError, as it was before it joined the tree."""


class UnitSyntaxError(UnitProblem):
    """Unit text outside the grammar (kb/records/unit_grammar.py; units.parse_unit turns it into a
    UnitProblem)."""


class RdfSyntaxError(LumaError):
    """Plain RDF given to `luma kb load` does not parse."""


class QueryError(LumaError):
    """A SPARQL query is malformed or failed."""


class QueryRefused(QueryError):
    """A query asks for something the read-only query path never does (update, SERVICE, LOAD)."""


class QueryTimeout(QueryError):
    """A query ran longer than its time-out."""


class StoreError(LumaError):
    """The knowledge-base store (embedded or remote) failed or answered incompletely."""


class StoreBusy(StoreError):
    """The embedded knowledge base is held by another luma process (kb/store/access.py)."""


class LedgerError(LumaError):
    """The evidence ledger refused or failed an operation."""


class RuleError(LumaError):
    """A rule file, a rule parameter or the rule set's dependency graph is invalid."""


class BadParam(RuleError):
    """A parameter override (`--param name=value`) that no rule declares or whose value is not of
    the parameter's type: the caller's input is at fault, so the CLI treats it as a usage error."""

    exit_code = 2


class BelowFloor(BadParam):
    """A parameter value below its rule's floor, outside an exploratory run (canonical rule 5: one
    chain, one workload or one architecture never makes a hardware requirement)."""


class RulesNotRun(LumaError):
    """A reader of derived facts found none: the rules have not run on this knowledge base."""


class NothingToReport(LumaError):
    """The KB holds nothing a report could be made of (no chain, no rules run ...)."""


class NotPriced(LumaError):
    """A machine state cannot be priced with this table (the message says what is missing;
    `reason`, when given, is the structured reason: experiments/pricing.py Unpriced)."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None, reason=None):
        self.reason = reason
        super().__init__(message, source=source, field=field)


class EngineError(LumaError):
    """A serving engine (a launched server or an in-process service) cannot serve a state."""


class LaunchError(EngineError, RuntimeError):
    """The server did not come up at this state (it exited, or never answered ready in time)."""

    def __init__(self, message: str, log_tail: str):
        super().__init__(message)
        self.log_tail = log_tail


class KVBudgetError(EngineError, ValueError):
    """The state's KV-cache level buys the engine no token at all."""


class CapacityError(EngineError, RuntimeError):
    """The state cannot serve a request at all (e.g. one sequence needs more KV blocks than the
    budget holds). The trial records failure cause `kv-capacity`; it is a FAIL, not a crash."""


class PilotError(LumaError):
    """The pilot's serving or its control socket failed."""


class StateFailed(PilotError):
    """A library state's server did not start (the message says why)."""


class BadRequest(PilotError):
    """A control-socket line that is malformed, of an unknown op, or without the server's token."""


class UnsafeSocketFolder(PilotError):
    """The control socket's folder is not private to this user (owner, mode 0700, not a link)."""


class UnknownName(LumaError):
    """A named thing (named query, machine, contract, backend scheme, format) does not exist: the
    name came from the caller, so the CLI treats it as a usage error (exit code 2)."""

    exit_code = 2


class UnknownContract(ContractError, UnknownName):
    """A contract reference that is neither a contract file nor a shipped contract's name: a
    ContractError to the code that loads contracts, an UnknownName (exit code 2) to the CLI."""

    exit_code = 2


class HostContended(LumaError):
    """A sprint's trial stayed contended through its re-runs (the host's other tenants, not the
    state, decided it): the sprint stops, its trials kept, no chain. `trial` is the trial that
    stopped it; the message says why when more than the contention does (an interleaved A/B)."""

    def __init__(self, trial, why: str = ""):
        self.trial, self.why = trial, why
        super().__init__(why or "host too contended to qualify")


class TensorError(LumaError):
    """A tensor or a quantisation setting given to a kernel is invalid (NaN/Inf, bits, axis, shape)."""


class MissingExtra(LumaError):
    """A command needs an optional extra of the install that is not there."""

    def __init__(self, extra: str, module: str, what: str | None = None):
        self.extra, self.module = extra, module
        who = f"{what} needs" if what else "this needs"
        super().__init__(f"{who} the {extra} extra ({module} is not installed): pip install -e '.[{extra}]'")


class Interrupted(LumaError):
    """Ctrl-C stopped the command: `interrupted`, or `interrupted: WHAT IT KEPT`. Exit code 130
    (128 + SIGINT, as a shell reports a command SIGINT stopped): a script tells it from a
    failure (1) and a usage mistake (2)."""

    exit_code = 130

    def __init__(self, kept: str | None = None):
        super().__init__("interrupted" + (f": {kept}" if kept else ""))
