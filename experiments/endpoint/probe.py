"""Probe a server that is already running as a use case (`luma endpoint probe` calls it): the
contract's load driven through it, each trial judged by the sprint's statistics, at whatever state
it runs in. Nothing is recorded: LUMA did not set (or see) the server's machine state."""

from __future__ import annotations

from dataclasses import dataclass

from luma.errors import ConfigError
from luma.experiments.endpoint.service import EndpointService
from luma.experiments.sprint import contract as contracts
from luma.experiments.sprint import states, trial


@dataclass
class Probe:
    """The contract as probed (its endpoint pointed at `base_url`), the URL and one trial per repetition."""

    contract: contracts.Contract
    base_url: str
    trials: list[trial.Trial]


def probe(settings, contract_ref: str, url: str | None = None, repetitions: int = 3) -> Probe:
    """Run `repetitions` trials of contract `contract_ref` against the server at `url` (default: the
    contract's service.base_url); ConfigError for a contract without an endpoint or a URL."""
    c = contracts.load(contract_ref, settings)
    if c.endpoint is None:
        raise ConfigError("probe drives an openai-endpoint service; this contract's service runs in-process "
                          "(`luma sprint run`)", field="service")
    base = url or c.endpoint.base_url
    if not base:
        raise ConfigError("no server to probe: no URL given, and the contract sets no service.base_url",
                          field="base_url")
    ep = c.endpoint.model_copy(update={"launch": None, "base_url": base, "pre_launch": []})
    c = c.model_copy(update={"endpoint": ep})
    svc = EndpointService(ep)
    cache = settings.home / "artifacts"
    spec = svc.trial_spec(cache)
    done = [trial.run_trial(c, states.State.of({}), svc.model_path(ep.baseline, cache), ep.baseline, "boundary",
                            seed=i, max_retries=0, service_spec=spec) for i in range(repetitions)]
    return Probe(c, base, done)
