"""The service under test behind an OpenAI-compatible HTTP endpoint (llama.cpp, vLLM, SGLang,
TGI, TensorRT-LLM …): the stream parser and the load generator that measures it."""
