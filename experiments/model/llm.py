"""Transformer serving, analytically: memory, roofline time, communication, energy.

From a model config (layers, hidden size, attention and KV heads, FFN size, vocabulary,
precision) and a machine's per-device figures:

* **Memory per device** = weights / (tp·pp) + KV cache (context × concurrency) / (KV shards·pp)
  + activations + the runtime's own reserve. KV bytes per token = 2 × layers × kv_heads ×
  head_dim × bytes per element (K and V, every layer).
* **Time** of an engine step = max(GEMM FLOPs / (tp · peak · eff_compute · fill), weight bytes /
  (tp · bandwidth · eff_bandwidth)) + max(attention FLOPs / (tp · peak · eff_compute), KV bytes /
  (tp · bandwidth · eff_kv)) (separate kernels, one after the other; fill = M / (M + gemm_half)
  for a GEMM of M token rows) + tensor/pipeline-parallel communication + per-step and
  per-sequence overheads. A step decoding n sequences and
  prefilling k prompts of P tokens: 2·N·(n + kP) + 4·layers·n·ctx·attn_dim +
  2·layers·k·P²·attn_dim FLOPs, the weights read once for all of it. Static batching: one
  prefill step for the batch, then decode steps. Continuous batching: n / G new prompts a step,
  prefilled together in the steps that carry them (TPOT is the mean step); a new prompt waits
  half a step, its carrying step, and an M/D/1 queue for prefill work (times a calibrated
  queueing factor). Pipeline stages run one after the other, so only tensor parallelism
  divides a step's time.
* **Communication**: two all-reduces per layer under tensor parallelism: 2(tp−1)/tp of the
  activations each way over the links a device can use for its group (links follow the machine
  records' convention: one link, one direction, `links` of them, a topology), plus two
  synchronisation steps where every peer is one hop away (switch, full mesh: reduce-scatter then
  all-gather) or 2(tp−1) around a ring; one activation hop per pipeline stage boundary.
* **Waiting for KV room**: sequences are admitted while their KV fits (the engine's
  kv_fraction of the memory left); in a steady closed loop every other request queues behind
  C − n others, n served per generation (Little's law); static batches wait whole rounds.
* **Energy** = power × devices × wall time ÷ the work done in it: per request, the devices'
  energy over one generation of the batch ÷ the batch; per output token, that ÷ new tokens
  (= power × devices ÷ token throughput, so the prefills interleaved into decode steps count).

Every function takes NumPy arrays that broadcast, so the simulator evaluates millions of states
per call. A decode step can never beat the weights it reads / memory bandwidth (tested); the
input-embedding table is a lookup (one row per token), not read whole.
"""

from __future__ import annotations

import numpy as np

from luma.experiments.model.llm_config import ModelConfig, ModelStack


def all_reduce(tp, size, link, links, topology, lat):
    """Seconds of one all-reduce of `size` bytes over `tp` devices. `link`: bytes/s of one link in
    one direction; `links` per device; `topology` 0 switch (every link reaches every peer), 1 mesh
    (one direct link per peer), 2 ring (two neighbours); `lat`: one synchronisation step.
    Bandwidth: 2(tp−1)/tp of the data leaves each device over the links it can use for its group.
    Latency: two steps where every peer is one hop away (reduce-scatter, all-gather: NCCL NVLS,
    TensorRT-LLM's two-shot), 2(tp−1) around a ring."""
    peers = np.maximum(tp - 1.0, 1.0)
    usable = np.where(topology == 1, np.minimum(links, peers), np.where(topology == 2, np.minimum(links, 2.0), links))
    steps = np.where(topology == 2, 2.0 * (tp - 1.0), 2.0)
    return np.where(tp > 1, 2.0 * (tp - 1.0) / np.maximum(tp, 1.0) * size / (link * usable) + steps * lat, 0.0)


def _hop(size, link, links, topology, lat):
    """Seconds to pass `size` bytes to the next pipeline stage (all links through a switch, one
    direct link otherwise)."""
    return size / (link * np.where(topology == 0, links, 1.0)) + lat


#: Arrival processes (the `arrival` key of serve()): a closed loop of `concurrency` clients, an
#: open loop at `rate` requests/s (Poisson, or gamma-distributed gaps of shape `burstiness`), and
#: offline (every request queued at once: `concurrency` requests).
ARRIVALS = {"closed": 0.0, "poisson": 1.0, "offline": 2.0}
#: Batching (the `batching` key): static batches that start together, continuous (in-flight)
#: batching with a prompt prefilled whole in one step, or chunked prefill (`chunk` tokens a step).
BATCHING = {"static": 0.0, "continuous": 1.0, "chunked": 2.0}


def _num(x):
    """A number as a float, an array (a ModelStack's figure) as float64s."""
    return float(x) if np.ndim(x) == 0 else np.asarray(x, dtype=np.float64)


def serve(cfg: ModelConfig | ModelStack, s: dict) -> dict:
    """Predicted figures of serving `cfg` on the states `s` (a dict of broadcastable arrays):

    weight_bytes, kv_bytes (per element), flops, bandwidth, capacity, interconnect (one link, one
    direction), links, topology (hardware.TOPOLOGY codes), link_latency (one synchronisation step),
    power (per device); count, tp, pp (per replica), replicas (data-parallel copies, default 1),
    ep (expert-parallel group, MoE; default tp); concurrency (closed-loop clients or offline
    requests, all replicas), context (prompt tokens: the mean of a length mix), context_sq (E[P²]
    of the mix, default P²), new_tokens (the mean), max_batch; arrival (ARRIVALS code), rate
    (requests/s, all replicas), burstiness (gamma shape of the gaps, 1 = Poisson); batching
    (BATCHING code; `waves` True is the same as static), chunk (prefill tokens per step under
    chunked prefill); eff_compute, eff_bandwidth, eff_link, eff_prefill (a factor on eff_compute for
    prompt tokens), eff_low_precision (a factor on eff_compute for 8-bit and smaller weights);
    gemm_half (token rows at which a GEMM reaches half its compute share, default 0); scheduler_steps
    (decode steps per scheduling decision, default 1); runtime_bytes (per device),
    step_overhead (seconds per engine step), layer_overhead (seconds per layer per step: kernel
    launches), seq_overhead (seconds per sequence per step),
    tp_overhead (seconds per all-reduce per doubling of the tensor-parallel group: kernel launch
    and synchronisation an engine adds beyond the link), act_bytes; optional kv_pool (bytes of a
    dedicated KV pool, NaN: the KV cache shares device memory), kv_block (tokens per KV block) and
    kv_vector_extra (bytes added per stored K or V vector, e.g. an int8 scale); optional codec
    keys (a partner's intervention, see effects.py): kv_capacity_factor, kv_read_factor,
    kv_encode_rate, step_added; queue_factor (scales the prefill queueing wait, calibrated).
    Throughputs are of the whole deployment; memory, KV and slots per device / per replica.
    """
    f = {k: np.asarray(v, dtype=np.float64) for k, v in s.items() if k != "waves"}
    waves = np.asarray(s.get("waves", False), dtype=bool) | (f.get("batching", 1.0) == BATCHING["static"])
    chunked = f.get("batching", 1.0) == BATCHING["chunked"]
    arrival = f.get("arrival", np.float64(0.0))
    # A ModelConfig's figures are numbers, a ModelStack's arrays (one per state): both broadcast.
    L, H = _num(cfg.layers), _num(cfg.hidden)
    Nm = _num(cfg.matmul_params())  # parameters one token multiplies through (active, for MoE)
    tp, pp, G = f["tp"], f["pp"], f["new_tokens"]
    P = f["context"]
    P2 = f.get("context_sq", P * P)
    reps = np.maximum(f.get("replicas", 1.0), 1.0)
    C = f["concurrency"] / reps  # a replica's share of the clients (or of the queued requests)
    lam = f.get("rate", np.float64(np.nan)) / reps
    ab = f.get("act_bytes", np.float64(2.0))
    # Memory.
    weights = cfg.total_params() * f["weight_bytes"]
    vectors = _num(cfg.kv_vectors_per_token())  # cached vectors a token stores (per-vector extras)
    kv_token = _num(cfg.kv_elements_per_token()) * f["kv_bytes"] + vectors * f.get("kv_vector_extra", 0.0)
    block = np.maximum(f.get("kv_block", 1.0), 1.0)
    # A partner's KV codec (effects.py): stored bytes / kv_capacity_factor, read at kv_read_factor.
    kv_store = kv_token / f["kv_capacity_factor"] if "kv_capacity_factor" in f else kv_token
    held = cfg.kv_tokens(P + G)  # sliding-window layers hold at most their window
    kv_seq = np.ceil(held / block) * block * kv_store  # bytes one sequence holds at full length
    kv_shards = np.minimum(tp, cfg.kv_shards) * pp
    open_loop = arrival == ARRIVALS["poisson"]
    demand = np.where(open_loop, np.inf, C)
    batch_cap = np.minimum(demand, f.get("max_batch", demand))
    pool = f.get("kv_pool", np.float64(np.nan))
    shared = np.isnan(pool)
    # KV bytes the state can hold: the engine's share of what weights, activations and the
    # runtime leave (kv_fraction: serving engines keep ~10 % back by default). The logits are
    # held for the sequences of one step, so they count for the batch the KV room admits.
    prompt_act = P * (4.0 * H + 2.0 * cfg.intermediate / tp) * ab
    room0 = np.where(shared, (f["capacity"] - (weights / (tp * pp) + prompt_act + f["runtime_bytes"]))
                     * f.get("kv_fraction", 1.0) * kv_shards, pool)
    batch0 = np.clip(np.floor(np.maximum(room0, 0.0) / kv_seq), 1.0, batch_cap)
    act = prompt_act + batch0 * cfg.vocab * 4.0
    base = weights / (tp * pp) + act + f["runtime_bytes"]
    kv_room = np.where(shared, (f["capacity"] - base) * f.get("kv_fraction", 1.0) * kv_shards, pool)
    slots = np.clip(np.floor(np.maximum(kv_room, 0.0) / kv_seq), 0.0, batch_cap)
    memory_need = base + np.where(shared, np.where(open_loop, slots, C) * kv_seq / kv_shards, pool)
    memory_min = base + np.where(shared, kv_seq / kv_shards, pool)  # one sequence: the least that runs
    # Time: a roofline per engine step, divided over the tensor-parallel group.
    # 8-bit GEMMs reach their own share of their (doubled) peak, 16-bit ones theirs.
    # No share of a datasheet peak exceeds it, whatever the factors multiply to.
    share = np.minimum(f["eff_compute"] * np.where(f["weight_bytes"] <= 1.0, f.get("eff_low_precision", 1.0), 1.0), 1.0)
    peak = tp * f["flops"] * share
    peak_pf = tp * f["flops"] * np.minimum(share * f.get("eff_prefill", 1.0), 1.0)  # prefill GEMMs: their own share
    bw = tp * f["bandwidth"] * f["eff_bandwidth"]
    bw_kv = tp * f["bandwidth"] * f.get("eff_kv", f["eff_bandwidth"])  # attention's KV reads
    link = np.maximum(f["interconnect"] * f.get("eff_link", 1.0), 1e-9)
    links, topo = f.get("links", np.float64(1.0)), f.get("topology", np.float64(0.0))
    # A step's fixed cost: the engine's scheduling plus kernel launches, which grow with the layers.
    lat, ts = f["link_latency"], f.get("seq_overhead", 0.0)
    # Multi-step scheduling (vLLM's --num-scheduler-steps k): the engine schedules once every k
    # steps, so its per-step scheduling cost is paid once per k steps, and a new prompt waits for
    # the next scheduling point, (k - 1) / 2 steps on average beyond the half step any arrival waits.
    sched = np.maximum(f.get("scheduler_steps", 1.0), 1.0)
    t0 = f.get("step_overhead", 0.0) / sched + f.get("layer_overhead", 0.0) * L
    # Kernel launch and synchronisation of the 2 per layer all-reduces, growing with the group.
    t_tp = f.get("tp_overhead", 0.0) * 2.0 * L * np.log2(np.maximum(tp, 1.0))
    ep = np.maximum(f.get("ep", tp), 1.0)
    wb = f["weight_bytes"]
    kv_read = kv_token / f["kv_read_factor"] if "kv_read_factor" in f else kv_token
    codec = "kv_encode_rate" in f or "step_added" in f
    enc = f.get("kv_encode_rate", np.float64(np.inf))
    ctx = P + G / 2.0  # a running sequence's mean context
    ctx_held = cfg.kv_tokens(ctx)
    moe_layers = _num(getattr(cfg, "moe_layers", 0))
    gemm_half = f.get("gemm_half", np.float64(0.0))

    def step(decode, ptoks, psq):
        """(compute, bytes, link, runtime, total) seconds of one engine step that decodes
        `decode` sequences and prefills `ptoks` prompt tokens (Σ P² = `psq` for attention): the
        weights are read once for all of it (for MoE, the experts the step's tokens touch). The
        first four are the terms that name the binding resource; total is the step's time."""
        tokens = decode + ptoks
        # A GEMM of M = tokens rows reaches its share of the peak only when M fills the tiles and
        # the SMs: M / (M + gemm_half) of it (a batch-1 prompt of 128 tokens runs far below
        # a 2,048-token one, a step of 4,096 tokens near the full share). The rows it wastes cost
        # at most the weight read: below that an engine runs a memory-bound kernel (GEMV,
        # split-K) that fills no tile, so a decode of a few sequences stays bandwidth-bound.
        fill = np.maximum(tokens / np.maximum(tokens + gemm_half, 1e-9), 1e-9)
        b_weights = (cfg.read_params(tokens) * wb + tokens * H * wb) / bw
        c_full = 2.0 * Nm * decode / peak + 2.0 * Nm * ptoks / peak_pf
        pad = np.minimum(c_full * gemm_half / np.maximum(tokens, 1e-9), b_weights)
        c_gemm = c_full + pad
        c_attn = decode * cfg.attention_flops_per_token(ctx) / peak + \
            2.0 * L * psq * cfg.attn_dim * np.minimum(ctx_held / np.maximum(ctx, 1.0), 1.0) / peak_pf / fill
        b_kv = ptoks * kv_store / bw + decode * ctx_held * kv_read / bw_kv
        # The GEMMs and attention are separate kernels, one after the other: each is bound by its
        # own compute or bytes, and a step costs their sum (a decode step of many long sequences
        # pays its GEMMs' compute and then its KV reads; neither hides the other).
        core = np.maximum(c_gemm, b_weights) + np.maximum(c_attn, b_kv)
        # What binds: the tile waste counts as compute only where the GEMM is compute-bound without
        # it; a GEMM of a few rows is the weight read's (its kernel streams the weights).
        c = c_full + np.where(c_full >= b_weights, pad, 0.0) + c_attn
        b = b_weights + b_kv
        comm = 2.0 * L * all_reduce(tp, tokens * H * ab, link, links, topo, lat) + \
            (pp - 1) * _hop(tokens * H * ab, link, links, topo, lat)
        if np.any(moe_layers):  # expert parallelism: each MoE layer's all-to-all dispatch and combine
            comm = comm + moe_layers * (ep > 1) * ((ep - 1.0) / ep * cfg.expert_parallel_bytes(tokens, ab)
                                                   / (link * np.where(topo == 0, links, 1.0)) + 2.0 * lat)
        run = t0 + ts * (decode + ptoks / np.maximum(P, 1.0)) + np.where(tp > 1, t_tp, 0.0)
        if codec:  # the codec's own time: encoding every KV byte written, a fixed latency per step
            run = run + f.get("step_added", 0.0) * (decode > 0) + (decode + ptoks) * kv_token / kv_shards / enc
        return c, b, comm, run, run + core + comm

    def seconds(t):
        return t[4]

    def generation(n):
        """(seconds of the step that carries a new prompt's prefill, of the mean step, the mean
        step's terms, the carrying step's terms, the steps a prompt's prefill spans, seconds of a
        plain decode step) with n sequences running. Static batching: the batch's prompts
        prefill together, then decode steps of n. Continuous: every step decodes the n running
        sequences; n / G new prompts a step replace the finished ones, k = max(n / G, 1) of them
        prefilled together in the share (n / G) / k of steps that carry prefill (TPOT: the mean
        over plain and carrying steps). Chunked: the prompt tokens spread over every step at
        most `chunk` a step, so each step carries n P / G prompt tokens (capped)."""
        p_new = np.where(waves, 0.0, n / np.maximum(G, 1.0))
        k = np.maximum(p_new, 1.0)
        plain = step(n, 0.0 * n, 0.0 * n)
        budget = np.maximum(f.get("chunk", np.float64(np.inf)), 1.0)
        spread = np.minimum(p_new * P, np.maximum(budget - n, 1.0))  # prompt tokens per chunked step
        pf_whole = step(np.where(waves, 0.0, n), np.where(waves, n, k) * P, np.where(waves, n, k) * P2)
        pf_chunk = step(n, spread, spread * P2 / np.maximum(P, 1.0))
        pf = tuple(np.where(chunked & ~waves, a, b) for a, b in zip(pf_chunk, pf_whole))
        t_plain, t_mean_pf = seconds(plain), seconds(pf)
        carrying = np.where(waves, 0.0, np.where(chunked, 1.0, p_new / k))
        t_step = t_plain + carrying * np.maximum(t_mean_pf - t_plain, 0.0)
        mean = tuple(a + carrying * (b - a) for a, b in zip(plain, pf))
        # A chunked prompt's own tokens ride its steps whole, as many as the step's budget leaves
        # beside the decodes (the spread above is the mean over steps, what TPOT sees; a prompt's
        # first token waits for its own chunks), so its first token comes after the steps they span.
        own = np.minimum(P, np.maximum(budget - n, 1.0))
        spans = np.where(chunked & ~waves, np.ceil(P / np.maximum(own, 1.0)), 1.0)
        # The prompt's tokens split evenly over the steps they span: its work is paid once.
        chunk_first = np.minimum(np.maximum(P / spans, spread), np.maximum(budget, own))
        first = step(n, chunk_first, P2 / spans)
        pf = tuple(np.where(chunked & ~waves, a, b) for a, b in zip(first, pf))
        t_pf = seconds(pf)
        return t_pf, t_step, mean, pf, spans, t_plain

    def wall(n):
        t_pf, t_step, _, _, spans, _ = generation(n)
        return spans * t_pf + np.maximum(G - 1.0, 0.0) * t_step

    # Open loop: the running sequences n solve n = λ · T_gen(n) (Little's law), at most the slots.
    n = np.maximum(slots, 1.0)
    if np.any(open_loop):
        guess = np.ones_like(n * lam)
        for _ in range(8):
            guess = np.clip(np.nan_to_num(lam * wall(guess), nan=1.0), 1.0, n)
        n = np.where(open_loop, guess, n)
    t_pf, t_step, dc, pf, spans, t_plain = generation(n)
    t_first = spans * t_pf
    # Prompts arrive as the other sequences finish ((n - 1) / t_gen a second; λ in an open loop)
    # and contend for prefill: a G/D/1 wait of the prefill work (Kingman: (c_a² + 0) / 2 of the
    # M/M/1 wait; c_a² = 1 / burstiness for gamma gaps), times a queueing factor calibration fits.
    pf_alone = np.maximum(2.0 * Nm * P / peak_pf, P * (kv_store + H * wb) / bw)
    t_gen0 = t_first + np.maximum(G - 1.0, 0.0) * t_step
    ca2 = np.where(open_loop, 1.0 / np.maximum(f.get("burstiness", 1.0), 1e-3), 1.0)
    arrivals = np.where(open_loop, lam, (n - 1.0) / np.maximum(t_gen0, 1e-12))
    rho = np.minimum(np.nan_to_num(arrivals * pf_alone), 0.95)
    queue = np.where(waves, 0.0, f.get("queue_factor", 1.0) * ca2 * rho / (2.0 * (1.0 - rho)) * pf_alone)
    offline = arrival == ARRIVALS["offline"]
    # Offline, the first wave's prompts arrive together: they prefill in ceil(n P / budget)
    # steps (one when the engine takes them whole), a prompt's first token on average half-way.
    budget_all = np.where(chunked, np.maximum(f.get("chunk", np.float64(np.inf)), 1.0), np.inf)
    burst = step(0.0 * n, n * P, n * P2)
    waves_of_burst = np.maximum(np.ceil(n * P / budget_all), 1.0)
    t_burst = seconds(burst) * (waves_of_burst + 1.0) / (2.0 * waves_of_burst)
    # An arrival waits for the step in flight only when one is: in an open loop the others in the
    # system are Poisson with mean λ·T_gen (M/G/∞), so the engine is busy with probability
    # 1 − exp(−λ·T_gen); a closed loop of one client finds it idle, of more it finds it busy.
    busy = np.where(open_loop, -np.expm1(-np.nan_to_num(lam) * t_gen0), (C > 1.5).astype(np.float64))
    ttft = np.where(offline & ~waves, t_burst, t_first + np.where(waves, 0.0, 0.5 * sched * t_step * busy) + queue)
    tpot = t_step
    t_gen = ttft + np.maximum(G - 1.0, 0.0) * tpot
    # Offline, a prompt's prefill is paid once: the first wave's in the burst, then plain decode
    # steps (nothing replaces a sequence while the first wave runs); the later waves' prompts
    # ride the carrying steps of the steady state. The mean time per wave is what n requests take.
    rounds = np.maximum(C / n, 1.0)
    first_wave = seconds(burst) + np.maximum(G - 1.0, 0.0) * t_plain
    t_gen = np.where(offline & ~waves, (first_wave + (rounds - 1.0) * np.maximum(G, 1.0) * t_step) / rounds, t_gen)
    # The time per output token follows the same waves: the first wave's tokens come from plain
    # decode steps, the later waves' from steps that also carry the replacing prompts.
    tpot = np.where(offline & ~waves, (t_plain + (rounds - 1.0) * t_step) / rounds, tpot)
    throughput = n / np.maximum(t_gen, 1e-12)
    # Requests beyond the KV room wait for a sequence to finish. Closed loop: every request
    # queues behind C - n others, served n per generation (Little's law); offline: the queued
    # requests drain n per generation, on average half of them ahead; static: the last of
    # ceil(C / n) rounds waits for all before it. Open loop: an M/G/c wait for one of the slots
    # (Allen-Cunneen with Sakasegawa's Erlang-C approximation), unbounded past capacity.
    busy = slots >= 1
    util = np.where(open_loop, lam * t_gen / np.maximum(slots, 1.0), 0.0)
    cslots = np.maximum(slots, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mmc = np.where(util < 1.0, util ** (np.sqrt(2.0 * (cslots + 1.0)) - 1.0) / (cslots * (1.0 - util)) * t_gen, np.inf)
    wait = np.where(waves, (np.ceil(C / n) - 1.0) * t_gen,
                    np.where(open_loop, mmc * (ca2 + f.get("service_cv2", 0.0)) / 2.0,
                             np.where(offline, 0.5, 1.0) * np.maximum(C - n, 0.0) / n * t_gen))
    share = np.where(waves, np.maximum(C - slots, 0.0) / np.maximum(C, 1.0),
                     np.where(open_loop, np.minimum(util, 1.0), (C > slots).astype(np.float64)))
    # An open loop past capacity serves at capacity and its queue grows without bound.
    over = open_loop & (util >= 1.0)
    served = np.where(open_loop, np.minimum(lam, cslots / np.maximum(t_gen, 1e-12)), throughput)
    ttft_out = np.where(over, np.inf, ttft)
    devices = f["count"]
    # One definition of energy: the devices' power over the wall time of one generation of the
    # batch (prefill, decode steps and the prefills interleaved into them) ÷ the work done in it.
    energy_request = f["power"] * devices / reps * t_gen / n
    zero = 0.0 * t_step
    return {
        "memory_need": memory_need, "memory_min": memory_min, "memory_capacity": f["capacity"],
        "weights_per_device": weights / (tp * pp),
        "kv_per_device": np.where(open_loop, n, C) * kv_seq / kv_shards,
        "activations": act, "slots": slots, "running": n, "kv_bytes_per_token": kv_store,
        "ttft": ttft_out, "tpot": tpot, "latency": ttft_out + np.maximum(G - 1.0, 0.0) * tpot,
        "wait": wait, "wait_fraction": np.where(busy, share, 1.0),
        "throughput": served * reps, "token_throughput": served * reps * G,
        "energy_per_request": energy_request, "energy_per_token": energy_request / np.maximum(G, 1.0),
        "terms": {
            "ttft": {"compute": pf[0] + zero, "memory_bandwidth": pf[1] + zero, "interconnect": pf[2] + zero,
                     "runtime": pf[3] + zero},
            "tpot": {"compute": dc[0] + zero, "memory_bandwidth": dc[1] + zero, "interconnect": dc[2] + zero,
                     "runtime": dc[3] + zero},
        },
    }


def decode_lower_bound(cfg: ModelConfig, bandwidth: float, precision: str | None = None) -> float:
    """Seconds per decode step can never be less than reading every matmul weight once (the
    input embedding is a lookup of one row per token, not a read of the table)."""
    return cfg.weight_read_bytes(precision) / bandwidth
