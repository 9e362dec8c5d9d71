# Sourced by the recorders (make_recordings.sh, record_pairs.sh, record_knee.sh):
#   start_vllm VENV PROJECT_PY MODEL_DIR LOG [vLLM flags...]
# starts vLLM's OpenAI server on 127.0.0.1 at a free port (PORT), in its own process group
# (the caller runs `set -m`), its output appended to LOG; stops the whole group when the
# shell exits; waits for /health (up to 300 s), or exits 1 with the log's tail.
start_vllm() {
  local venv="$1" project_py="$2" model_dir="$3" log="$4"
  shift 4
  PORT=$("$project_py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$venv/bin/python" -m vllm.entrypoints.openai.api_server \
    --model "$model_dir" --served-model-name tiny-llama --host 127.0.0.1 --port "$PORT" \
    "$@" >>"$log" 2>&1 &
  VLLM_PID=$!
  trap stop_vllm EXIT
  trap 'exit 143' TERM INT
  local t_start
  t_start=$(date +%s)
  for _ in $(seq 1 300); do
    if ! kill -0 "$VLLM_PID" 2>/dev/null; then
      echo "vLLM exited during start-up:"; tail -30 "$log"; exit 1
    fi
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then break; fi
    sleep 1
  done
  curl -sf "http://127.0.0.1:$PORT/health" >/dev/null || { echo "vLLM did not start"; exit 1; }
  echo "vLLM up on 127.0.0.1:$PORT in $(( $(date +%s) - t_start )) s ($*)"
}

stop_vllm() {
  kill -TERM -- "-$VLLM_PID" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$VLLM_PID" 2>/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$VLLM_PID" 2>/dev/null || true
}
