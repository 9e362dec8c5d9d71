#!/usr/bin/env bash
# Record a real vLLM (CPU, tiny random Llama) pushed past its knee, for the incident regime
# (issue #43): tests/data/vllm_real/knee.tar.gz.
#   record_knee.sh VLLM_VENV PROJECT_PYTHON OUTDIR
# 1. start vLLM (--max-num-seqs 4, the flags of make_recordings.sh) on 127.0.0.1
# 2. probe_capacity.py: the requests per second it serves of the mix today (saturated)
# 3. record.py with a phased open-loop load sized on that capacity c:
#    BEFORE s at LOW x c (below the knee), SURGE s at HIGH x c (the queue grows the whole
#    time), AFTER s at POST x c (back below the knee: the queue drains)
# 4. OUTDIR/knee/ (pages, load.jsonl, meta.json with the probe), OUTDIR/knee.tar.gz,
#    OUTDIR/knee.vllm.log
# vLLM and the recorder share one session (make_recordings.sh's header says why); vLLM
# has its own process group in it and stops as a whole.
# Override with the environment: LOW, HIGH, POST, BEFORE, SURGE, AFTER, SEED, and
# CAPACITY (req/s: no probe, the phases are shares of it). The probe can mislead on a busy
# shared host: at 25 req/s offered its own ~1,100 open streams and the API server took the
# CPU and it measured 2.6 req/s, while the engine then served 4.2 req/s with no queue.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/vllm_real/serve_vllm.sh
. "$HERE/serve_vllm.sh"
LOW="${LOW:-0.6}" HIGH="${HIGH:-1.6}" POST="${POST:-0.5}"
BEFORE="${BEFORE:-60}" SURGE="${SURGE:-90}" AFTER="${AFTER:-180}" SEED="${SEED:-1}"
MIX=(--class 8:80:128 --class 2:320:512)
FLAGS=(--max-num-seqs 4 --dtype float32 --enforce-eager --max-model-len 1024
  --num-gpu-blocks-override 256 --gpu-memory-utilization "${VLLM_CPU_MEMORY_UTILIZATION:-0.3}")

if [ "${1:-}" = "--one" ]; then
  shift
  VENV="$1" PROJECT_PY="$2" MODEL_DIR="$3" DIR="$4"
  set -m
  start_vllm "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$DIR.vllm.log" "${FLAGS[@]}"
  if [ -n "${CAPACITY:-}" ]; then
    echo "{\"capacity_rps\": $CAPACITY, \"given\": true}" >"$DIR.probe.json"
  else
    "$PROJECT_PY" "$HERE/probe_capacity.py" "http://127.0.0.1:$PORT" --rate 25 "${MIX[@]}" \
      --warmup 15 --duration 30 --out "$DIR.probe.json"
    sleep 5  # the probe's cancelled requests leave the engine
  fi
  c=$("$PROJECT_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["capacity_rps"])' "$DIR.probe.json")
  phase() { "$PROJECT_PY" -c 'import sys; print(f"{sys.argv[1]}:{float(sys.argv[2]) * float(sys.argv[3]):.2f}")' "$@"; }
  "$PROJECT_PY" "$HERE/record.py" "http://127.0.0.1:$PORT" "$DIR" \
    --phase "$(phase "$BEFORE" "$LOW" "$c")" --phase "$(phase "$SURGE" "$HIGH" "$c")" \
    --phase "$(phase "$AFTER" "$POST" "$c")" --seed "$SEED" "${MIX[@]}" \
    --max-in-flight 4000 --drain 120 --vllm-flags "${FLAGS[*]}"
  "$PROJECT_PY" - "$DIR/meta.json" "$DIR.probe.json" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1]))
meta["probe"] = json.load(open(sys.argv[2]))
open(sys.argv[1], "w").write(json.dumps(meta, indent=2) + "\n")
PY
  exit 0
fi

VENV="${1:?usage: record_knee.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
PROJECT_PY="${2:?usage: record_knee.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
OUT="${3:?usage: record_knee.sh VLLM_VENV PROJECT_PYTHON OUTDIR}"
VENV="$(cd "$VENV" && pwd)"
MODEL_DIR="$VENV/phasewatch-tiny-llama"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1
[ -f "$MODEL_DIR/config.json" ] || "$VENV/bin/python" "$HERE/build_model.py" "$MODEL_DIR"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
dir="$OUT/knee"
rm -rf "$dir" "$dir.tar.gz" "$dir.vllm.log" "$dir.probe.json"
INNER=""
forward() { [ -n "$INNER" ] && kill -TERM "$INNER" 2>/dev/null; wait "$INNER" 2>/dev/null; exit 143; }
trap forward TERM INT
setsid bash "$0" --one "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$dir" &
INNER=$!
wait "$INNER" || { echo "recording failed; the end of vLLM's log:"; tail -40 "$dir.vllm.log"; exit 1; }
start=$("$PROJECT_PY" -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["start"]))' "$dir/meta.json")
tar -C "$OUT" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$start" \
  -cf - knee | gzip -9n >"$dir.tar.gz"
echo "knee: $(ls "$dir" | grep -c '\.prom$') pages, archive $(du -h "$dir.tar.gz" | cut -f1)"
