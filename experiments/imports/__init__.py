"""Evidence from other tools: serving benchmarks' result files (vLLM's `vllm bench serve`, AIPerf,
SGLang's `bench_serving`, the MLPerf loadgen, llama.cpp's `llama-bench`) become pex-trial records
judged by LUMA's own rules, and published MLPerf Inference results become machine records and
vendor-claim facts."""
