"""The service under test behind an OpenAI-compatible HTTP endpoint (llama.cpp, vLLM, SGLang,
TGI, TensorRT-LLM …).

`spec` reads a contract's `[service]` table; `service` is the sprint's side of it (variants,
artifacts, request texts); `trial` runs one trial inside the trial worker: `launch` starts the
engine at the state, `client` (with the stream parser `sse`) drives the load; `engines`, `gguf`
and `tinyllama` install llama.cpp and make its models; `gpu` reads this host's NVIDIA GPUs.
`aiperf_comparison` runs LUMA's client against NVIDIA AIPerf (`aiperf`) and `agreement` tabulates
the two (`luma endpoint bench`).
"""
