"""Named length mixes of common serving datasets, each with the statistics a public source states.

Data only (lengths.py turns an entry into a `LengthMix`): per marginal the statistics as the source
gives them, in tokens, and where each figure was read. A dataset whose figures no stored public copy
shows is left out rather than estimated: the MLPerf OpenOrca (llama2-70b), CNN-DailyMail (GPT-J) and
mixtral-8x7b mixes and LMSYS-Chat-1M are missing for that reason (the MLPerf reference files state the
mean output only: 294.45 tokens for llama2-70b, 144.84 for mixtral-8x7b; no input mean).

Statistics "computed from the file" were computed by LUMA (numpy, nearest-rank-free linear
percentiles, `np.percentile`) from the per-request length file the source publishes, read at the
stated commit on 2026-12-05.
"""

from __future__ import annotations

#: Where a CV used for a marginal stated by its mean alone comes from (lengths.ASSUMED_CV).
SHAREGPT4_FILE = ("https://github.com/microsoft/sarathi-serve/blob/72339db5b120614033b317880ad3a05a5e4c9415/"
                  "data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv")
_DATACRUNCH = ("https://github.com/datacrunch-research/h200-benchmarks/tree/"
               "c091ef530a525d2e788bc41c39a4450b09c9f2ad/sglang/outputs (llama_3_3_70b_online_output.jsonl, "
               "llama_405b_online_output.jsonl)")
_VIDUR = "https://github.com/microsoft/vidur/blob/7d47513363ec447a741ac5e47241580b47724fbf/data/processed_traces/"

PRESETS: dict[str, dict] = {
    "sharegpt": {
        "title": "vLLM PR #18566 'Support datasets in vllm bench serve': 1000 ShareGPT requests "
                 "(ShareGPT_Vicuna_unfiltered, benchmark_serving's sampling), Llama-3.1-8B tokenizer",
        "url": "https://github.com/vllm-project/vllm/pull/18566",
        "notes": ["means = the run's 'Total input tokens: 229711' and 'Total generated tokens: 203068' "
                  "over 'Successful requests: 1000' (chat endpoint, so prompts include the chat template)",
                  "output median = 0.617 x the mean: the median of (median_e2e_latency_ms - median_ttft_ms) / "
                  "(mean_e2e_latency_ms - median_ttft_ms) over the four ShareGPT runs (4 and 8 requests/s, "
                  "Llama-3.3-70B and Llama-3.1-405B; ratios 0.613, 0.615, 0.618, 0.632) in sglang.bench_serving's "
                  "own result lines, " + _DATACRUNCH + " (the same sampling, outputs of the dataset's length): "
                  "a request's decode time is its output length times a per-token time that varies little "
                  "below saturation, so the ratio is the outputs' median over their mean",
                  "the prompt's spread is not stated: it takes the coefficient of variation of the "
                  "openchat-sharegpt4 preset's file (0.89)"],
        "prompt": {"mean": 229.711, "cv": 0.89},
        "output": {"mean": 203.068, "p50": 125.3},
    },
    "openchat-sharegpt4": {
        "title": "Sarathi-Serve (OSDI'24) openchat_sharegpt4 trace, Llama-2 tokenizer, 8k-filtered: "
                 "sharegpt_8k_filtered_stats_llama2_tokenizer.csv (30,731 requests)",
        "url": SHAREGPT4_FILE,
        "notes": ["computed from the file; its median prompt (1730 tokens) is the one public summaries "
                  "quote from the paper's Table 2 (https://arxiv.org/abs/2403.02310)",
                  "rank correlation 0.05 -> independent"],
        "prompt": {"mean": 2340.0, "p50": 1730, "p90": 5696, "p99": 7434, "min": 1, "max": 8141},
        "output": {"mean": 438.7, "p50": 415, "p90": 834, "p99": 998, "min": 2, "max": 1024},
    },
    "arxiv-summarization": {
        "title": "Vidur (MLSys'24) / Sarathi-Serve arxiv_summarization trace, Llama-2 tokenizer, "
                 "filtered to 4k: arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv (28,257 requests)",
        "url": _VIDUR + "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
        "notes": ["computed from the file", "rank correlation -0.11 -> independent"],
        "prompt": {"mean": 2588.1, "p50": 2730, "p90": 3702, "p99": 3933, "min": 1, "max": 4054},
        "output": {"mean": 291.4, "p50": 167, "p90": 372, "p99": 3271, "min": 5, "max": 4056},
    },
    "azure-conv": {
        "title": "Splitwise (ISCA'24) Azure LLM inference trace 2023, conversation service, as Vidur "
                 "ships it: splitwise_conv.csv (19,366 requests)",
        "url": _VIDUR + "splitwise_conv.csv",
        "notes": ["computed from the file", "rank correlation 0.07 -> independent"],
        "prompt": {"mean": 1154.7, "p50": 1020, "p90": 2734, "p99": 4142, "min": 2, "max": 14050},
        "output": {"mean": 211.1, "p50": 129, "p90": 424, "p99": 601, "min": 7, "max": 1000},
    },
    "azure-code": {
        "title": "Splitwise (ISCA'24) Azure LLM inference trace 2023, coding service, as Vidur ships it: "
                 "splitwise_code.csv (8,819 requests)",
        "url": _VIDUR + "splitwise_code.csv",
        "notes": ["computed from the file", "rank correlation -0.02 -> independent"],
        "prompt": {"mean": 2047.8, "p50": 1469, "p90": 5188, "p99": 7436, "min": 3, "max": 7437},
        "output": {"mean": 27.9, "p50": 13, "p90": 55, "p99": 251, "min": 6, "max": 1899},
    },
    "sonnet": {
        "title": "vLLM bench serve defaults for the sonnet dataset (sonnet_input_len=550, "
                 "sonnet_output_len=150, sonnet_prefix_len=200), as printed in vLLM PR #23867",
        "url": "https://github.com/vllm-project/vllm/pull/23867",
        "notes": ["the prompt is built from whole poem lines up to the input length, so 550 is the "
                  "target, not an exact count; the output is max_tokens=150"],
        "prompt": 550,
        "output": 150,
    },
}
