"""Transformer serving, analytically: memory, roofline time, communication, energy.

From a model config (layers, hidden size, attention and KV heads, FFN size, vocabulary,
precision) and a machine's per-device figures:

* **Memory per device** = weights / (tp·pp) + KV cache (context × concurrency) / (KV shards·pp)
  + activations + the runtime's own reserve. KV bytes per token = 2 × layers × kv_heads ×
  head_dim × bytes per element (K and V, every layer).
* **Time** of an engine step = max(FLOPs / (tp · peak · eff_compute), weight bytes / (tp ·
  bandwidth · eff_bandwidth) + KV bytes / (tp · bandwidth · eff_kv)) + tensor/pipeline-parallel
  communication + per-step and per-sequence overheads. A step decoding n sequences and
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

from luma.experiments.model.llm_config import ModelConfig


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


def serve(cfg: ModelConfig, s: dict) -> dict:
    """Predicted figures of serving `cfg` on the states `s` (a dict of broadcastable arrays):

    weight_bytes, kv_bytes (per element), flops, bandwidth, capacity, interconnect (one link, one
    direction), links, topology (hardware.TOPOLOGY codes), link_latency (one synchronisation step),
    power (per device); count, tp, pp; concurrency, context (prompt tokens), new_tokens,
    max_batch; eff_compute, eff_bandwidth, eff_link; runtime_bytes (per device), step_overhead
    (seconds per engine step), seq_overhead (seconds per sequence per step), act_bytes; optional kv_pool (bytes of a dedicated KV pool, NaN:
    the KV cache shares device memory), kv_block (tokens per KV block) and kv_vector_extra
    (bytes added per stored K or V vector, e.g. an int8 scale); optional codec keys (a partner's
    intervention, see effects.py): kv_capacity_factor (stored KV bytes = raw / it),
    kv_read_factor (KV bytes read per decode step = raw / it), kv_encode_rate (bytes/s per device
    the codec encodes KV at), step_added (seconds added to every decode step); queue_factor
    (scales the prefill queueing wait, calibrated); waves (True: static batching, the batch's
    sequences start together and prefill as one batch, as the shipped decoder does; False:
    continuous batching, each step decodes the running sequences and prefills the new prompts).
    """
    f = {k: np.asarray(v, dtype=np.float64) for k, v in s.items() if k != "waves"}
    waves = np.asarray(s.get("waves", False), dtype=bool)
    L, H, Nm = float(cfg.layers), float(cfg.hidden), float(cfg.matmul_params())
    wread = Nm * f["weight_bytes"]  # bytes a pass reads whole (the input embedding is a lookup)
    tp, pp, C, P, G = f["tp"], f["pp"], f["concurrency"], f["context"], f["new_tokens"]
    ab = f.get("act_bytes", np.float64(2.0))
    # Memory.
    weights = cfg.total_params() * f["weight_bytes"]
    kv_vec = cfg.d_head * f["kv_bytes"] + f.get("kv_vector_extra", 0.0)
    kv_token = 2.0 * L * cfg.kv_heads * kv_vec
    block = np.maximum(f.get("kv_block", 1.0), 1.0)
    # A partner's KV codec (effects.py): stored bytes / kv_capacity_factor, read at kv_read_factor.
    kv_store = kv_token / f["kv_capacity_factor"] if "kv_capacity_factor" in f else kv_token
    kv_seq = np.ceil((P + G) / block) * block * kv_store  # bytes one sequence holds at full length
    kv_shards = np.minimum(tp, cfg.kv_heads) * pp
    act = (P * (4.0 * H + 2.0 * cfg.intermediate / tp) * ab + C * cfg.vocab * 4.0)
    base = weights / (tp * pp) + act + f["runtime_bytes"]
    pool = f.get("kv_pool", np.float64(np.nan))
    shared = np.isnan(pool)
    # KV bytes the state can hold: the engine's share of what weights, activations and the
    # runtime leave (kv_fraction: serving engines keep ~10 % back by default).
    kv_room = np.where(shared, (f["capacity"] - base) * f.get("kv_fraction", 1.0) * kv_shards, pool)
    batch_cap = np.minimum(C, f.get("max_batch", C))
    slots = np.clip(np.floor(np.maximum(kv_room, 0.0) / kv_seq), 0.0, batch_cap)
    memory_need = base + np.where(shared, C * kv_seq / kv_shards, pool)
    memory_min = base + np.where(shared, kv_seq / kv_shards, pool)  # one sequence: the least that runs
    n = np.maximum(slots, 1.0)
    # Time: a roofline per engine step, divided over the tensor-parallel group.
    peak = tp * f["flops"] * f["eff_compute"]
    bw = tp * f["bandwidth"] * f["eff_bandwidth"]
    bw_kv = tp * f["bandwidth"] * f.get("eff_kv", f["eff_bandwidth"])  # attention's KV reads
    link = np.maximum(f["interconnect"] * f.get("eff_link", 1.0), 1e-9)
    links, topo = f.get("links", np.float64(1.0)), f.get("topology", np.float64(0.0))
    lat, t0, ts = f["link_latency"], f.get("step_overhead", 0.0), f.get("seq_overhead", 0.0)
    wb = f["weight_bytes"]
    kv_read = kv_token / f["kv_read_factor"] if "kv_read_factor" in f else kv_token
    codec = "kv_encode_rate" in f or "step_added" in f
    enc = f.get("kv_encode_rate", np.float64(np.inf))
    ctx = P + G / 2.0  # a running sequence's mean context

    def step(decode, prompts):
        """(compute, bytes, link, runtime) seconds of one engine step that decodes `decode`
        sequences and prefills `prompts` prompts of P tokens: the weights are read once for all."""
        tokens = decode + prompts * P
        c = (2.0 * Nm * tokens + 4.0 * L * decode * ctx * cfg.attn_dim + 2.0 * L * prompts * P * P * cfg.attn_dim) / peak
        b = (wread + prompts * P * kv_store + tokens * H * wb) / bw + decode * ctx * kv_read / bw_kv
        comm = 2.0 * L * all_reduce(tp, tokens * H * ab, link, links, topo, lat) + \
            (pp - 1) * _hop(tokens * H * ab, link, links, topo, lat)
        run = t0 + ts * (decode + prompts)
        if codec:  # the codec's own time: encoding every KV byte written, a fixed latency per step
            run = run + f.get("step_added", 0.0) * (decode > 0) + (decode + prompts * P) * kv_token / kv_shards / enc
        return c, b, comm, run

    def seconds(t):
        return t[3] + np.maximum(t[0], t[1]) + t[2]

    # Static batching (waves): the batch's prompts prefill together, then decode steps of n.
    # Continuous batching: every step decodes the n running sequences; n / G new prompts a step
    # replace the finished ones, k = max(n / G, 1) of them prefilled together in the share
    # (n / G) / k of steps that carry prefill, so TPOT is the mean over plain and carrying steps.
    # A new prompt's first token comes from the carrying step, half a step after it arrives.
    p_new = np.where(waves, 0.0, n / np.maximum(G, 1.0))
    k = np.maximum(p_new, 1.0)
    plain = step(n, 0.0 * n)
    pf = step(np.where(waves, 0.0, n), np.where(waves, n, k))
    t_plain, t_first = seconds(plain), seconds(pf)
    carrying = np.where(waves, 0.0, p_new / k)
    t_step = t_plain + carrying * np.maximum(t_first - t_plain, 0.0)
    dc = tuple(a + carrying * (b - a) for a, b in zip(plain, pf))  # the mean step's terms
    # Prompts arrive as the other sequences finish ((n - 1) / t_gen a second) and contend for
    # prefill: an M/D/1 wait of the prefill work, times a queueing factor calibration fits to
    # published TTFTs.
    pf_alone = np.maximum(2.0 * Nm * P / peak, P * (kv_store + H * wb) / bw)
    t_gen0 = t_first + np.maximum(G - 1.0, 0.0) * t_step
    rho = np.minimum((n - 1.0) / np.maximum(t_gen0, 1e-12) * pf_alone, 0.95)
    queue = np.where(waves, 0.0, f.get("queue_factor", 1.0) * rho / (2.0 * (1.0 - rho)) * pf_alone)
    ttft = t_first + np.where(waves, 0.0, 0.5 * t_step) + queue
    tpot = t_step
    t_gen = ttft + np.maximum(G - 1.0, 0.0) * tpot
    throughput = n / np.maximum(t_gen, 1e-12)
    # Requests beyond the KV room wait for a sequence to finish. Continuous: in a steady closed
    # loop every request queues behind C - n others, served n per generation (Little's law);
    # waves: the last of ceil(C / n) rounds waits for all before it.
    busy = slots >= 1
    wait = np.where(waves, (np.ceil(C / n) - 1.0) * t_gen, np.maximum(C - n, 0.0) / n * t_gen)
    share = np.where(waves, np.maximum(C - slots, 0.0) / C, (C > slots).astype(np.float64))
    devices = f["count"]
    # One definition of energy: the devices' power over the wall time of one generation of the
    # batch (prefill, decode steps and the prefills interleaved into them) ÷ the work done in it.
    energy_request = f["power"] * devices * t_gen / n
    zero = 0.0 * t_step
    return {
        "memory_need": memory_need, "memory_min": memory_min, "memory_capacity": f["capacity"],
        "weights_per_device": weights / (tp * pp), "kv_per_device": C * kv_seq / kv_shards,
        "activations": act, "slots": slots, "kv_bytes_per_token": kv_store,
        "ttft": ttft, "tpot": tpot, "wait": wait, "wait_fraction": np.where(busy, share, 1.0),
        "throughput": throughput, "token_throughput": throughput * G,
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
