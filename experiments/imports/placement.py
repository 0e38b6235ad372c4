"""Where imported trials are placed (`trials.Target`) from what the command line says: the
contract (a shipped name or a TOML path, loaded as `luma sprint` loads it), the state's levels
(`DIM=LEVEL`, parsed as a sprint's are, over the contract's base state), the variant (default:
the contract's baseline), the workload (the contract's) and the architecture the tool ran on."""

from __future__ import annotations

import socket

from luma.errors import ConfigError, StateError
from luma.experiments.imports.trials import Target
from luma.experiments.services import for_contract
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint import states
from luma.experiments.sprint.records import architecture as this_architecture, environment as this_environment

KINDS = ("cpu", "gpu", "accelerator", "system")


def parse_state(items: list[str], base: dict) -> states.State:
    """The levels `DIM=LEVEL` over `base` (the contract's [state]); units checked, never this
    host's capacity (the run happened elsewhere)."""
    levels = {d: states.parse_level(d, lv) for d, lv in base.items()}
    for item in items:
        dim, sep, text = item.partition("=")
        if not sep or not dim.strip() or not text.strip():
            raise StateError(f"state {item!r} is not DIM=LEVEL (e.g. kv_cache=256MiB, compute=2core)", field="state")
        dim = dim.strip()
        levels[dim] = states.parse_level(dim, text)
        states.unit_kind(dim, levels[dim])
    if not levels:
        raise StateError("no state: name the machine state the tool ran at (DIM=LEVEL)", field="state")
    return states.State.of(levels)


def at_load(c: contracts.Contract, concurrency: int | None = None,
            max_new_tokens: int | None = None) -> contracts.Contract:
    """The contract `c` held at another load (`--concurrency`, `--max-new-tokens`): the same
    clauses, the given load, and a name that says so (`<name>-c4-out64`), because a contract at
    another load is another contract -- its records state the concurrency they were judged at,
    and no trial of it is taken for one of `c`."""
    load, suffix = {}, ""
    if concurrency is not None and concurrency != c.load.concurrency:
        load["concurrency"], suffix = concurrency, f"-c{concurrency}"
    if max_new_tokens is not None and max_new_tokens != c.load.max_new_tokens:
        load["max_new_tokens"], suffix = max_new_tokens, suffix + f"-out{max_new_tokens}"
    if not load:
        return c
    data = c.model_dump(exclude_none=True)
    data["load"] = {**data.get("load", {}), **load}
    data["name"] = (c.name[:200] + suffix)
    if c.endpoint is not None:  # the [service] table as a contract file writes it
        data.pop("endpoint", None)
        data["service"] = {"kind": "openai-endpoint", **c.endpoint.model_dump(exclude_none=True)}
    try:
        return contracts.Contract.model_validate(data)
    except ValueError as exc:
        raise ConfigError(f"the contract at that load is not valid: {str(exc).splitlines()[0]}",
                          field="concurrency") from None


def target(contract_ref: str, state_items: list[str], *, settings=None, variant: str | None = None,
           architecture: str | None = None, kind: str | None = None, vendor: str | None = None,
           here: bool = False, concurrency: int | None = None, max_new_tokens: int | None = None) -> Target:
    """The Target of an import (ConfigError naming the option at fault); `concurrency` and
    `max_new_tokens` hold the contract at the run's load (`at_load`)."""
    c = at_load(contracts.load(contract_ref, settings), concurrency, max_new_tokens)
    service = for_contract(c)
    baseline = getattr(service, "baseline", None) or "baseline"
    if here and architecture:
        raise ConfigError("this host and a named architecture both given: give one", field="architecture")
    if here:
        arch, env, host = this_architecture(), this_environment(), socket.gethostname() or None
    elif architecture:
        if kind not in KINDS or not vendor:
            raise ConfigError(f"a named architecture needs its kind ({'|'.join(KINDS)}) and vendor",
                              field="architecture")
        arch, env, host = {"name": architecture, "kind": kind, "vendor": vendor}, None, None
    else:
        raise ConfigError("which machine did the tool run on? name the architecture (name, kind, vendor) or this "
                          "host", field="architecture")
    return Target(c, parse_state(state_items, dict(c.state)), variant or baseline, service.workload(), arch, env, host)
