"""One evaluator for predict and explore: a contract, a state space and (optionally) a
calibration give predicted figures, verdicts, binding resources and a cost for any batch of
states, addressed by their flat index in the space's product of axes.

Axes a space leaves out keep their default: the contract's load and `[state]` for a service on
this host; the accelerator's own figures, tensor parallelism over every device, and the
contract's load for an LLM space.
"""

from __future__ import annotations

import numpy as np

from luma.errors import ContractError
from luma.experiments.model import hardware, judge, lengths, llm, llm_calibrate, llm_error, llm_published, services
from luma.experiments.model.space import Axis, Space

#: Accelerator figures a datasheet does not give. compute and bandwidth are fallbacks only: the
#: calibration on published measurements (llm_calibrate.py) replaces them. The link's: NCCL's
#: ring all-reduce reaches a bus bandwidth of 365-370 GB/s on 8 x H100, about 80 % of NVLink's
#: 450 GB/s each way (https://github.com/NVIDIA/nccl/issues/1455).
LLM_EFFICIENCY = {"compute": 0.6, "bandwidth": 0.8, "interconnect": 0.8, "runtime_memory": "2 GiB"}
#: Reference precisions: quality 1.0 by definition unless a space says otherwise.
REFERENCE = ("fp32", "tf32", "fp16", "bf16")


class Evaluator:
    def __init__(self, contract, space: Space, calibration: dict | None = None, effects=None):
        self.contract, self.space, self.calibration = contract, space, calibration or {}
        self.effects = effects  # a partner intervention (effects.Effects), LLM spaces only
        if effects is not None and not space.is_llm:
            raise ContractError("a partner intervention is evaluated on an LLM space (name the model served, or give a "
                              "space with one)",
                              source=space.source, field="model")
        self.checks = judge.checks_of(contract)
        self.names = list(space.axes)
        self.shape = tuple(len(space.axes[n]) for n in self.names)
        self.size = int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1
        load = contract.load
        self.defaults = {"concurrency": load.concurrency, "max_batch": load.max_batch,
                         "context": load.context, "max_new_tokens": load.max_new_tokens}
        if space.is_llm:
            self._setup_llm()
        else:
            self._setup_service()
        self.errors = (self.calibration.get("errors_by_metric") or {}).get(
            "llm" if space.is_llm else contract.service) or {}
        if space.is_llm and not self.errors:
            self.errors = dict(self.llm_cal.get("errors_by_metric") or {})
        self.evidence_class = "projected" if space.is_llm else "simulated"

    # -- set-up ----------------------------------------------------------------------------

    def _setup_service(self) -> None:
        self.service = services.get(self.contract.service)
        self.params = self.service.params(self.calibration)
        self.host = services.host(self.calibration)
        if self.space.cost:
            self.cost_unit = f"{self.space.currency} per hour"
        else:  # no prices: a relative unit, and the label says so
            self.cost_unit = "relative cost units per hour (1 per core, 0.1 per GiB; no prices given)"
        self.cost_source = self.space.cost_source or (f"as given in {self.space.source}" if self.space.cost else
                                                      "no prices given")

    def _setup_llm(self) -> None:
        sp = self.space
        if "accelerator_type" not in sp.axes:
            raise ContractError("an LLM space needs an accelerator_type axis (or a state with accelerator_type=NAME)",
                              source=sp.source, field="accelerator_type")
        self.accels = [hardware.load(n, sp.machines, sp.project) for n in sp.axes["accelerator_type"].labels]
        precisions = sp.axes["precision"].labels if "precision" in sp.axes else [sp.model.precision]
        self.precisions = precisions
        fig = [[hardware.figures(m, p) for p in precisions] for m in self.accels]
        self.tab = {k: np.array([[f[k] if f[k] is not None else np.nan for f in row] for row in fig], dtype=np.float64)
                    for k in ("flops", "capacity", "bandwidth", "interconnect", "links", "topology", "link_latency",
                              "power")}
        prices = [sp.cost.get(m.name, hardware.price(m)) for m in self.accels]
        currency = hardware.prices_currency(sp, self.accels)
        if all(p is not None for p in prices):
            self.price, self.cost_unit = np.array(prices, dtype=np.float64), f"{currency} per hour"
            self.cost_source = sp.cost_source or (f"as given in {sp.source}" if sp.cost else "the machine records")
        else:
            self.price, self.cost_unit = self.tab["power"][:, 0] / 1000.0, "kW (no price for every accelerator)"
            self.cost_source = "the machines' power figures (no price for every accelerator)"
        # Engine figures fitted to published measurements (the project's own calibration, else
        # the shipped one); a space's [efficiency] overrides them, and then the stated error no
        # longer describes the figures used.
        own = self.calibration.get("llm")
        self.llm_cal = own if isinstance(own, dict) and "fitted" in own else llm_calibrate.shipped()
        fitted = self.llm_cal["fitted"]
        self.overridden = sorted(set(sp.efficiency) & {"compute", "bandwidth"})
        eff = {**LLM_EFFICIENCY, **sp.efficiency}
        self.eff = {k: float(eff[k]) for k in ("compute", "bandwidth", "interconnect")}
        vendors = [hardware.vendor(m) for m in self.accels]
        # Engine figures per (accelerator, engine) pair: the engine's own profile where calibration
        # fitted one, the engine-neutral figures for a state that names none.
        self.engines = sp.axes["engine"].labels if "engine" in sp.axes else [None]
        pairs_v = [v for v in vendors for _ in self.engines]
        pairs_e = [e for _ in vendors for e in self.engines]
        self.engine = llm_calibrate.engine(fitted, pairs_v, pairs_e)
        for key, name in (("eff_compute", "compute"), ("eff_bandwidth", "bandwidth"), ("eff_kv", "bandwidth")):
            if name in sp.efficiency:
                self.engine[key] = np.full(len(pairs_v), self.eff[name])
        defaults = [llm_published.ENGINES.get(e or "", {}) for e in self.engines]
        self.engine_batching = np.array([llm.BATCHING[d.get("batching", "continuous")] for d in defaults])
        self.engine_chunk = np.array([float(d.get("chunk", np.inf)) for d in defaults])
        self.engine_max_batch = np.array([float(d.get("max_batch", np.inf)) for d in defaults])
        self.mixes = [lengths.parse(x, "state.dataset") for x in sp.axes["dataset"].labels] if "dataset" in sp.axes \
            else None
        self.band_tables = self._band_tables()
        self.kv_fraction = float(self.llm_cal.get("fixed", {}).get("kv_fraction", 1.0))
        self.runtime_bytes = hardware.quantity(eff["runtime_memory"], "bytes", "efficiency.runtime_memory",
                                               allow_zero=True)
        q = [sp.quality.get(p, 1.0 if p in REFERENCE else np.nan) for p in precisions]
        self.quality = np.array(q, dtype=np.float64)

    # -- evaluation ------------------------------------------------------------------------

    def indices(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        if not self.shape:
            return {}
        return dict(zip(self.names, np.unravel_index(flat, self.shape)))

    def values(self, idx: dict[str, np.ndarray], name: str, default):
        if name in idx:
            return np.take(self.space.axes[name].values, idx[name])
        return default

    def evaluate(self, flat: np.ndarray) -> tuple[dict, np.ndarray]:
        """(figures, cost) of the states at `flat` indices."""
        idx = self.indices(np.asarray(flat, dtype=np.int64))
        return self._eval_llm(idx, flat) if self.space.is_llm else self._eval_service(idx, flat)

    def _demand(self, idx, name, fallback):
        d = self.defaults.get(name)
        return self.values(idx, name, float(d if d is not None else fallback))

    def _eval_service(self, idx, flat) -> tuple[dict, np.ndarray]:
        n = np.shape(flat)
        st = self.contract.state
        cores = st.get("compute")
        cores = float(cores.value if hasattr(cores, "value") else (hardware.count(cores, "state.compute") if cores else 1))
        s = {"variant": self.values(idx, "variant", np.zeros(n, dtype=np.int64)),
             "compute": self.values(idx, "compute", cores),
             "host_memory": self.values(idx, "host_memory", np.nan),
             "kv_cache": self.values(idx, "kv_cache", np.nan),
             "concurrency": self._demand(idx, "concurrency", 1), "max_batch": self._demand(idx, "max_batch", 8),
             "context": self._demand(idx, "context", 128 if self.service.name == "embedding" else 64),
             "new_tokens": self._demand(idx, "max_new_tokens", 32),
             "rate": self.contract.load.rate if self.contract.load.mode == "poisson" else np.nan}
        s["variant"] = np.broadcast_to(s["variant"], n)
        m = services.evaluate(self.service, self.params, self.host, s)
        mem = np.where(np.isnan(s["host_memory"]), m["memory_need"], s["host_memory"])
        kv = np.where(np.isnan(s["kv_cache"]), 0.0, s["kv_cache"])
        cost = s["compute"] * float(self.space.cost.get("core", 1.0)) + \
            (mem + kv) / 2**30 * float(self.space.cost.get("host_memory_gib", 0.1))
        return m, np.broadcast_to(cost, n)

    def _eval_llm(self, idx, flat) -> tuple[dict, np.ndarray]:
        n = np.shape(flat)
        a = idx.get("accelerator_type", np.zeros(n, dtype=np.int64))
        p = idx.get("precision", np.zeros(n, dtype=np.int64))
        e = idx.get("engine", np.zeros(n, dtype=np.int64))
        cnt = self.values(idx, "accelerator_count", None)
        tp, pp = self.values(idx, "tp", None), self.values(idx, "pp", None)
        reps = self.values(idx, "replicas", None)
        if reps is None:
            # Devices beyond one tp x pp group are replicas (8 GPUs at tp 2: four TP2 copies, not TP8).
            reps = cnt / (tp * (pp if pp is not None else 1.0)) if cnt is not None and tp is not None else 1.0
            reps = np.where(np.mod(reps, 1) == 0, np.maximum(reps, 1.0), 1.0) if np.ndim(reps) or reps != 1.0 else reps
        if cnt is None:
            cnt = (tp if tp is not None else 1.0) * (pp if pp is not None else 1.0) * reps
        pp = pp if pp is not None else 1.0
        tp = tp if tp is not None else cnt / (pp * reps)
        supported = np.isclose(tp * pp * reps, cnt) & (tp >= 1) & (np.mod(tp, 1) == 0)
        wprec = np.take(np.array([hardware.PRECISION_BYTES[x] for x in self.precisions]), p)
        kvp = self.values(idx, "kv_precision", None)
        kvb = wprec if kvp is None else np.take(np.array([hardware.PRECISION_BYTES[x] for x in
                                                          self.space.axes["kv_precision"].labels]), idx["kv_precision"])
        flops = self.tab["flops"][a, p]
        C = self._demand(idx, "concurrency", 1)
        P = self._demand(idx, "context", 1024)
        G = self._demand(idx, "max_new_tokens", 128)
        P2 = P * P
        if self.mixes is not None:  # a length mix replaces the fixed prompt and output lengths
            d = idx["dataset"]
            P = np.take(np.array([x.mean_prompt for x in self.mixes]), d)
            P2 = np.take(np.array([x.mean_prompt_sq for x in self.mixes]), d)
            G = np.take(np.array([x.mean_output for x in self.mixes]), d)
        arrival, rate = self._arrivals(idx)
        if "batching" in idx:
            batching = np.take(np.array([llm.BATCHING[x] for x in self.space.axes["batching"].labels]), idx["batching"])
        else:  # the engine's own default
            batching = np.take(self.engine_batching, e)
        pair = a * len(self.engines) + e
        s = {"weight_bytes": wprec, "kv_bytes": kvb, "flops": np.nan_to_num(flops, nan=1.0),
             "capacity": self.values(idx, "hbm_capacity", self.tab["capacity"][a, p]),
             "bandwidth": self.values(idx, "memory_bandwidth", self.tab["bandwidth"][a, p]),
             # An `interconnect` axis level is what one device sends each way, through a switch.
             "interconnect": self.values(idx, "interconnect", self.tab["interconnect"][a, p]),
             "links": self.tab["links"][a, p] if "interconnect" not in idx else 1.0,
             "topology": self.tab["topology"][a, p] if "interconnect" not in idx else 0.0,
             "link_latency": self.tab["link_latency"][a, p], "power": self.tab["power"][a, p],
             "count": cnt, "tp": tp, "pp": pp, "replicas": reps, "ep": self.values(idx, "ep", tp),
             "concurrency": C, "context": P, "context_sq": P2, "new_tokens": G,
             "max_batch": self.values(idx, "max_batch", np.minimum(np.take(self.engine_max_batch, e),
                                                                   np.where(arrival == llm.ARRIVALS["poisson"], np.inf, C))),
             "arrival": arrival, "rate": rate, "burstiness": self.values(idx, "burstiness", 1.0),
             "batching": batching, "chunk": np.take(self.engine_chunk, e),
             "scheduler_steps": self.values(idx, "scheduler_steps", 1.0),
             "eff_link": self.eff["interconnect"], "runtime_bytes": self.runtime_bytes, "act_bytes": 2.0,
             "kv_fraction": self.kv_fraction,
             **{k: (np.take(v, pair) if np.ndim(v) else v) for k, v in self.engine.items()}}
        if self.effects is not None:
            self._apply(s)
        out = llm.serve(self.space.model, s)
        # Tensor parallelism needs a link; a machine without one serves on one device only.
        supported = supported & ~np.isnan(flops) & ((tp <= 1) | (s["interconnect"] > 0))
        m = {**out, "quality": np.take(self.quality, p), "memory_dimension": "hbm_capacity",
             "slot_dimension": "hbm_capacity", "tail": self._tail(),
             "supported": np.broadcast_to(supported, n),
             "terms": {**out["terms"], "latency": out["terms"]["tpot"]}}
        if self.mixes is not None:  # a latency quantile is that quantile's output length's (judge.value)
            outs, d = self.mixes, idx["dataset"]
            m["output_quantile"] = lambda q: np.take(np.array([x.latency_output(q) for x in outs]), d)
        m["band"] = self._bands(a, e, batching, arrival, C, n)
        m["replicas"] = np.broadcast_to(reps, n)
        cost = np.broadcast_to(cnt * np.take(self.price, a), n)
        return m, cost

    def _arrivals(self, idx) -> tuple[np.ndarray, np.ndarray]:
        """(ARRIVALS code, requests/s) of the states: the arrivals axis, else Poisson at the state's
        rate when it names one, else the contract's load (a Poisson contract at its rate, else a
        closed loop of its clients)."""
        load = self.contract.load
        own = getattr(load, "rate", None)
        contract_rate = float(own) if own and getattr(load, "mode", None) == "poisson" else np.nan
        rate = self.values(idx, "rate", contract_rate)
        if "arrivals" in idx:
            code = np.take(np.array([llm.ARRIVALS[x] for x in self.space.axes["arrivals"].labels]), idx["arrivals"])
        else:  # a state that names a rate (or a Poisson contract) means requests arriving at it
            code = np.float64(llm.ARRIVALS["poisson" if "rate" in idx or not np.isnan(contract_rate) else "closed"])
        if np.any((code == llm.ARRIVALS["poisson"]) & np.isnan(rate)):
            raise ContractError("open-loop (poisson) arrivals need a rate: add rate=N (requests/s)", field="state.rate")
        return code, rate

    def _band_tables(self) -> dict | None:
        """Per metric, the band (llm_error.prediction_band) of every accelerator x engine x batching
        class x load class -- built once, looked up per state; None when the calibration has no
        bands (or the space overrides the fitted figures): the held-out p90s apply."""
        cal = self.llm_cal
        if self.overridden or not cal.get("bands"):
            return None
        return {kind: np.array([[[[llm_error.prediction_band(cal, kind, b, lo, eng, m.name) for lo in llm_error.LOADS]
                                  for b in llm_error.BATCH_CLASSES] for eng in self.engines] for m in self.accels])
                for kind in ("ttft", "tpot", "latency", "token_throughput")}

    def _bands(self, a, e, batching, arrival, C, n) -> dict:
        """The relative error band each metric of each state states: its setting class's
        leave-one-source-out bound, widened for an engine or machine the calibration has no
        records of."""
        if self.band_tables is None:
            return {k: np.broadcast_to(np.float64(v), n) for k, v in self.errors.items()}
        cls = (a, e, llm_error.batch_code(batching), llm_error.load_code(arrival, C))
        out = {kind: np.broadcast_to(table[cls], n) for kind, table in self.band_tables.items()}
        out["throughput"] = out["token_throughput"]
        return out

    def _apply(self, s: dict) -> None:
        """A partner intervention's effects, after its own costs (see effects.py)."""
        e = self.effects
        s["weight_bytes"] = s["weight_bytes"] / e.weight_capacity_factor
        s["power"] = s["power"] + e.power
        s["runtime_bytes"] = s["runtime_bytes"] + e.buffering
        s["step_added"] = e.added_latency
        if e.acts_on_kv:
            s["kv_capacity_factor"] = e.kv_capacity_factor
            s["kv_read_factor"] = e.kv_read(np.asarray(s["bandwidth"]) * s["eff_bandwidth"])
            if e.kv_encode_rate:
                s["kv_encode_rate"] = e.kv_encode_rate

    def _tail(self) -> dict:
        """p95/p50 per metric from published median/p99 pairs (llm_published.tails)."""
        return {**llm_calibrate.shipped()["tail"], **(self.llm_cal.get("tail") or {})}

    def judge(self, m: dict) -> judge.Judgement:
        return judge.judge(self.checks, m, m.get("band") or self.errors)

    def label(self, flat: int) -> dict[str, str]:
        """The state at `flat` as {axis: level label}."""
        idx = self.indices(np.asarray([flat]))
        return {n: self.space.axes[n].labels[int(idx[n][0])] for n in self.names}

    def axis(self, name: str) -> Axis | None:
        return self.space.axes.get(name)


def figures_row(m: dict, i: int = 0) -> dict:
    """Scalar figures of state i of an evaluation (what predict and explore print)."""
    out = {}
    for k, v in m.items():
        if isinstance(v, np.ndarray) and v.ndim >= 1 and v.dtype.kind == "f":
            out[k] = float(np.broadcast_to(v, v.shape)[i] if v.shape else v)
        elif isinstance(v, (float, int)) and not isinstance(v, bool):
            out[k] = float(v)
    return out
