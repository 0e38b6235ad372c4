"""The fixed sentence sets of the MiniLM kernels, the embedding service and the endpoint loads:
an evaluation set and a disjoint calibration set (plain data, no torch, so a load generator can
draw its texts from them without importing a model)."""

from __future__ import annotations

#: A fixed, varied sentence set (short and long, technical and plain), so figures are comparable.
SENTENCES = [
    "The accepted-service contract fixes the p99 latency at 200 milliseconds.",
    "A cat sat on the warm windowsill and watched the rain.",
    "Int8 quantization stores each weight in one byte instead of four.",
    "The memory bandwidth of the accelerator bounds the decode throughput.",
    "She booked a train to the coast for the long weekend.",
    "KV-cache capacity grows with context length and with concurrency.",
    "The minimum passing machine state has eight cores and sixteen gigabytes of memory.",
    "Heavy rain is expected over the mountains tonight.",
    "Per-channel scales keep small output channels accurate.",
    "The recipe needs two eggs, flour, sugar and a pinch of salt.",
    "Boundary qualification requires repeated physical trials under the same contract.",
    "A vendor datasheet claims 4.8 terabytes per second of HBM bandwidth.",
    "The museum reopened after a year of renovation work.",
    "Throughput doubled once the batch size matched the cache line layout.",
    "Our football team won the final in extra time.",
    "The binding resource is the one whose restoration recovers PASS.",
    "Calibration picks a clip value that minimises reconstruction error.",
    "He planted tomatoes, basil and peppers in the garden.",
    "CXL memory expanders add capacity at higher latency than local DRAM.",
    "The quarterly report shows revenue growth in every region.",
    "A sentence transformer maps text to a dense vector of 384 numbers.",
    "The bridge was closed for inspection after the storm.",
    "Tail latency is measured with enough requests for the percentile asked.",
    "Simulated evidence never qualifies a boundary on its own.",
    "The orchestra played Beethoven's ninth symphony to a full hall.",
    "Speculative decoding trades extra compute for fewer sequential steps.",
    "The hikers reached the summit just before sunset.",
    "Power capping at 450 watts reduced throughput by twelve percent.",
    "A short one.",
    "Why does the model answer faster when the prompt is cached?",
    "The library lends laptops to students during exam weeks.",
    "An intervention that recovers the same binding resource repeatedly is a recurring remedy.",
]

#: Calibration text, disjoint from SENTENCES: the smoothing factors never see the evaluation set.
CALIBRATION = [
    "Latency percentiles need enough requests to be estimated with confidence.",
    "The river flooded the lower fields after a week of storms.",
    "A quantized model trades a little accuracy for a lot of memory.",
    "Please send the signed contract back by Friday.",
    "The accelerator ran out of high-bandwidth memory at a context of 32k tokens.",
    "Children played football in the park until it got dark.",
    "Weight-only quantization keeps activations in floating point.",
    "The bakery on the corner sells bread from six in the morning.",
    "Concurrency raises throughput until the memory bandwidth saturates.",
    "Which hardware requirement recurs across workloads and architectures?",
    "The old lighthouse guided ships along the rocky coast.",
    "An embedding service answers in under ten milliseconds at the median.",
    "He forgot his umbrella and got soaked on the way home.",
    "The partner claims its codec doubles the effective memory capacity.",
    "Tokens per second fell when the cache spilled to host memory.",
    "The committee approved the budget for the new school building.",
]
