"""Where a LUMA project lives and what its commands may use — read from the environment in one
place (`Settings.from_env`), once per command, and passed explicitly from there on.

Variables: `LUMA_HOME`, `LUMA_DB_URL`, `LUMA_KB_URL` (and `LUMA_KB_QUERY_URL`,
`LUMA_KB_UPDATE_URL`, `LUMA_KB_STORE_URL` for endpoints with their own paths), `LUMA_WAIT`,
`LUMA_QUERY_MEMORY`, `LUMA_QUERY_MAX_ANSWER_BYTES`, `LUMA_QUERY_REQUIRE_SANDBOX`,
`LUMA_RULES_TIMEOUT`, `LUMA_RULES_MEMORY`,
`LUMA_RUNNER_KEY`, the input-file limits `LUMA_MAX_*_FILE_BYTES` (kb/records/input_files.py) and, for the
machine rather than a project, `LUMA_ENGINE_CACHE` (`engine_cache`), `LUMA_KERNEL_CACHE`
(`kernel_cache`) and `LUMA_RULES_CACHE` (`rules_cache`)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from luma.errors import ConfigError

DEFAULT_HOME = ".luma"
#: Memory one user query may use on the embedded store (kb/store/isolated_query.py).
DEFAULT_QUERY_MEMORY = 4 * 2**30
#: Size of one query's answer.
DEFAULT_QUERY_ANSWER_BYTES = 2 * 2**30
#: Below this a query process cannot even open the store.
MIN_QUERY_MEMORY = 64 * 2**20
#: Seconds and memory one `luma rules run` may use on the embedded store (rules/isolated_run.py):
#: a full run at 100k chains takes minutes and holds a few GiB of derived quads, so the bounds
#: stop a runaway rule (a cartesian product) without stopping a large honest run.
DEFAULT_RULES_TIMEOUT = 3600.0
DEFAULT_RULES_MEMORY = 8 * 2**30
#: The input-file limits a user may change (kb/records/input_files.py declares their defaults).
FILE_LIMIT_VARIABLES = ("LUMA_MAX_RECORD_FILE_BYTES", "LUMA_MAX_PARTNER_FILE_BYTES",
                        "LUMA_MAX_CONFIG_FILE_BYTES", "LUMA_MAX_QUERY_FILE_BYTES")

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)
_FACTORS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
            "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


@dataclass(frozen=True)
class Settings:
    """Resolved locations of the ledger and the knowledge base of one project, and its limits."""

    home: Path
    db_url: str
    kb_url: str
    #: Seconds a writer waits for the embedded KB's lock (None: writers 0, readers 30).
    wait: float | None = None
    query_memory: int = DEFAULT_QUERY_MEMORY
    query_answer_bytes: int = DEFAULT_QUERY_ANSWER_BYTES
    #: The runner key (a name under $LUMA_HOME/keys/) runners sign with; None: the project's default.
    runner_key: str | None = None
    #: A SPARQL endpoint's Query / Update / Graph Store URLs where they differ from
    #: `kb_url` + /query, /update, /store (Fuseki, GraphDB, Virtuoso).
    kb_query_url: str | None = None
    kb_update_url: str | None = None
    kb_store_url: str | None = None
    #: Refuse a user query or rule run when the network sandbox cannot be installed (kb/store/sandbox.py).
    require_sandbox: bool = False
    #: What `luma rules run` may use on the embedded store: seconds (0: no limit) and bytes.
    rules_timeout: float = DEFAULT_RULES_TIMEOUT
    rules_memory: int = DEFAULT_RULES_MEMORY
    #: Input-file limits set by the user, by variable name (bytes); the rest keep their defaults.
    file_limits: tuple[tuple[str, int], ...] = ()
    #: How `home` was named: "argument" (the caller's, e.g. --home), "LUMA_HOME" or "default".
    home_from: str = "argument"

    @classmethod
    def local(cls, home: str | os.PathLike, **overrides) -> "Settings":
        """A project at `home` with the embedded ledger and KB inside it; nothing read from the
        environment (benches and tests build their throw-away projects with it)."""
        root = Path(home).absolute()
        return cls(home=root, db_url=f"sqlite:///{root / 'ledger.sqlite'}", kb_url=f"oxigraph:{root / 'kb'}",
                   **overrides)

    @classmethod
    def from_env(cls, *, environ: Mapping[str, str] | None = None, home: str | os.PathLike | None = None,
                 wait: float | None = None) -> "Settings":
        """The settings a command runs with: the environment (`os.environ` unless given), with
        the command line's `home` and `wait` winning over `LUMA_HOME` and `LUMA_WAIT`. The only
        place LUMA reads its `LUMA_*` variables."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name) or None

        home_from = "argument" if home else "LUMA_HOME" if get("LUMA_HOME") else "default"
        root = Path(home or get("LUMA_HOME") or DEFAULT_HOME).absolute()
        if wait is None and get("LUMA_WAIT"):
            wait = parse_seconds(get("LUMA_WAIT"), "LUMA_WAIT")
        limits = tuple((v, parse_count(env[v], v)) for v in FILE_LIMIT_VARIABLES if env.get(v) is not None)
        return cls(
            home=root,
            db_url=get("LUMA_DB_URL") or f"sqlite:///{root / 'ledger.sqlite'}",
            kb_url=get("LUMA_KB_URL") or f"oxigraph:{root / 'kb'}",
            wait=wait,
            query_memory=parse_size(get("LUMA_QUERY_MEMORY"), "LUMA_QUERY_MEMORY",
                                    DEFAULT_QUERY_MEMORY, MIN_QUERY_MEMORY),
            query_answer_bytes=parse_size(get("LUMA_QUERY_MAX_ANSWER_BYTES"),
                                          "LUMA_QUERY_MAX_ANSWER_BYTES", DEFAULT_QUERY_ANSWER_BYTES, 1),
            runner_key=get("LUMA_RUNNER_KEY"),
            kb_query_url=get("LUMA_KB_QUERY_URL"),
            kb_update_url=get("LUMA_KB_UPDATE_URL"),
            kb_store_url=get("LUMA_KB_STORE_URL"),
            require_sandbox=get("LUMA_QUERY_REQUIRE_SANDBOX") == "1",
            rules_timeout=(parse_seconds(get("LUMA_RULES_TIMEOUT"), "LUMA_RULES_TIMEOUT")
                           if get("LUMA_RULES_TIMEOUT") else DEFAULT_RULES_TIMEOUT),
            rules_memory=parse_size(get("LUMA_RULES_MEMORY"), "LUMA_RULES_MEMORY", DEFAULT_RULES_MEMORY,
                                    MIN_QUERY_MEMORY),
            file_limits=limits,
            home_from=home_from,
        )

    def at(self, home: str | os.PathLike) -> "Settings":
        """The same settings for the project at `home`: an embedded ledger and KB move with it;
        a server ledger or KB (a URL the user gave) stays where it is."""
        root = Path(home).absolute()
        moved = {}
        if self.db_url == f"sqlite:///{self.home / 'ledger.sqlite'}":
            moved["db_url"] = f"sqlite:///{root / 'ledger.sqlite'}"
        if self.kb_url == f"oxigraph:{self.home / 'kb'}":
            moved["kb_url"] = f"oxigraph:{root / 'kb'}"
        return replace(self, home=root, **moved)

    def file_limit(self, variable: str, default: int) -> int:
        """The input-file limit named `variable`: the user's value, else `default`."""
        return dict(self.file_limits).get(variable, default)


def engine_cache(environ: Mapping[str, str] | None = None) -> Path:
    """Where serving engines' sources and converters are kept on this machine (shared by every
    project): `LUMA_ENGINE_CACHE`, else ~/.cache/luma/engines."""
    env = os.environ if environ is None else environ
    return Path(env.get("LUMA_ENGINE_CACHE") or Path.home() / ".cache" / "luma" / "engines").absolute()


def kernel_cache(environ: Mapping[str, str] | None = None) -> Path:
    """Where the int8 kernels keep their measured choices on this machine (shared by every
    project): `LUMA_KERNEL_CACHE`, else $XDG_CACHE_HOME/luma, else ~/.cache/luma."""
    env = os.environ if environ is None else environ
    if env.get("LUMA_KERNEL_CACHE"):
        return Path(env["LUMA_KERNEL_CACHE"]).absolute()
    return _machine_cache(env)


def rules_cache(environ: Mapping[str, str] | None = None) -> Path:
    """Where the rules engine keeps its analyses of rule texts and the texts that passed its checks,
    by digest (rules/analysis.py; shared by every project: they all run the shipped rules):
    `LUMA_RULES_CACHE`, else $XDG_CACHE_HOME/luma/rules, else ~/.cache/luma/rules."""
    env = os.environ if environ is None else environ
    if env.get("LUMA_RULES_CACHE"):
        return Path(env["LUMA_RULES_CACHE"]).absolute()
    return _machine_cache(env) / "rules"


def _machine_cache(env: Mapping[str, str]) -> Path:
    """LUMA's folder in the user's cache: $XDG_CACHE_HOME/luma, else ~/.cache/luma."""
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (base / "luma").absolute()


def parse_count(text: str, what: str) -> int:
    """A positive whole number (of bytes)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise ConfigError(f"must be a positive whole number of bytes, got {text!r}", source=what)
    return value


def parse_size(text: str | None, what: str, default: int, minimum: int = 1) -> int:
    """Bytes from `4GiB`, `512 MB`, `1048576`; `default` when `text` is None or empty."""
    if text is None or not str(text).strip():
        return default
    m = _SIZE.match(str(text))
    if not m:
        raise ConfigError(f"not a size: {text!r} (e.g. 4GiB, 512MiB, 1000000)", source=what)
    value = int(float(m.group(1)) * _FACTORS[(m.group(2) or "B").lower()])
    if value < minimum:
        raise ConfigError(f"{text!r} is below the minimum of {minimum} bytes", source=what)
    return value


def parse_seconds(text: str, what: str) -> float:
    """A non-negative number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"must be a non-negative number of seconds, got {text!r}", source=what)
    return value
