#!/usr/bin/env bash
# Record A/B pairs of a real vLLM (CPU, tiny random Llama) for the what-if twin's check on a
# real server (bench/whatif_vllm.py): each pair is one change of setting or of traffic, and
# each of its two settings is recorded N times under the same open-loop load.
#   record_pairs.sh VLLM_VENV PROJECT_PYTHON OUTDIR [--runs N] [--steady S] [--only PAIR[,PAIR]]
# For each pair, run k = 1..N: start vLLM with setting A (as make_recordings.sh does:
# 127.0.0.1, a free port, the recorder in the server's session), record run k, stop it;
# then the same with B. Run k of A and of B are thus minutes apart and share the machine's
# mood of that moment (a 2-core shared machine drifts by tens of per cent over an hour).
# Each run is tests/vllm_real/record.py: a 30 s warm-up and S s of steady load (240 by
# default), with the SAME seed in every run and in A and B, so A and B see the same
# arrivals (traffic2's B at twice the rate: the same draws, the offsets halved).
# Loads are sized to the machine of the day: before A's first run the pair's A server is
# probed (probe_capacity.py: the mix sent well above capacity, the requests served per
# second counted) and each side's rate is a share of that capacity (share_of below), the
# same in all N runs. The in-flight cap (2048) is high enough that no arrival is dropped:
# the queue stays in vLLM and the load stays open loop.
#   OUTDIR/<pair>/capacity.json    the probe of A (capacity_rps) the rates are shares of
#   OUTDIR/<pair>/pair.json        the A and B flags, the load spec, seed, rate, capacity,
#                                  the `phasewatch whatif --set/--server` arguments of A → B
#   OUTDIR/<pair>/<A|B>/run<k>/    a recording (the pages, load.jsonl, meta.json)
#   OUTDIR/<pair>/<A|B>/vllm.log   the server's log (appended on each start)
#   OUTDIR/<pair>.tar.gz           A's and B's run 1 and pair.json (pack_pair.py), what
#                                  tests/data/vllm_real keeps
# A run whose meta.json exists is kept: run it again with a larger --runs to add runs 2..N
# to pairs already recorded (their capacity.json, so their rates, are kept too). About
# 5 minutes per setting and run of 240 s on 2 cores, 31 minutes a pair of 3 runs.
#
# The pairs (tests/data/vllm_real/README.md says why these loads; C = A's capacity):
#   traffic2      --max-num-seqs 4, the mix of make_recordings.sh at 0.4 C (no queue)
#                 → 0.8 C (queues)                            whatif --set rate_scale=2
#   maxseqs4to16  --max-num-seqs 4 → 16 at 0.8 C of that mix           --set max_num_seqs=16
#   kvpool4x      --num-gpu-blocks-override 16 → 64 (blocks of 128 tokens), 0.8 C of
#                 300-word prompts with 600-token answers: A holds about two at once, so
#                 requests wait for KV and get preempted               --set num_gpu_blocks=64
#   budget        --max-num-batched-tokens 2048 → 256, 8 req/s (fixed: far from capacity
#                 on either side): 70 % 64-word prompts with 128-token answers, 30 %
#                 900-word prompts with 64                    --set max_num_batched_tokens=256
#   budgetup      --max-num-batched-tokens 128 → 1024, 8 req/s (fixed): 70 % 48-word
#                 prompts with 128-token answers, 30 % 800-word prompts with 64: a chunk
#                 budget raised past every chunk A shows   --set max_num_batched_tokens=1024
#   kvpool15      --num-gpu-blocks-override 16 → 24 at 0.8 C of kvpool4x's load: a KV pool
#                 ×1.5 on a pressured server                    --set num_gpu_blocks=24
#   maxseqsdown   --max-num-seqs 16 → 4 at 0.2 C of 32-word prompts with 512-token answers
#                 (decode-heavy; B at about 0.8 of its own capacity)  --set max_num_seqs=4
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/vllm_real/serve_vllm.sh
. "$HERE/serve_vllm.sh"
WARMUP="${WARMUP:-30}"  # the environment may override these two (a quick check)
PAUSE="${PAUSE:-10}"
PAIRS_ALL="traffic2 maxseqs4to16 kvpool4x budget budgetup kvpool15 maxseqsdown"
COMMON=(--dtype float32 --enforce-eager --max-model-len 1024
  --gpu-memory-utilization "${VLLM_CPU_MEMORY_UTILIZATION:-0.3}")
SEED=1
CAP=2048  # in flight: high enough that the queue stays in vLLM, not in the client
MIX=(--class 8:80:128 --class 2:320:512)

# flags_of PAIR SIDE: the engine flags of one setting (COMMON is added to every one).
flags_of() {
  case "$1:$2" in
    traffic2:[AB]) echo "--max-num-seqs 4 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    maxseqs4to16:A) echo "--max-num-seqs 4 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    maxseqs4to16:B) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    kvpool4x:A) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 16" ;;
    kvpool4x:B) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 64" ;;
    budget:A) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    budget:B) echo "--max-num-seqs 16 --max-num-batched-tokens 256 --num-gpu-blocks-override 256" ;;
    budgetup:A) echo "--max-num-seqs 16 --max-num-batched-tokens 128 --num-gpu-blocks-override 256" ;;
    budgetup:B) echo "--max-num-seqs 16 --max-num-batched-tokens 1024 --num-gpu-blocks-override 256" ;;
    kvpool15:A) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 16" ;;
    kvpool15:B) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 24" ;;
    maxseqsdown:A) echo "--max-num-seqs 16 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    maxseqsdown:B) echo "--max-num-seqs 4 --max-num-batched-tokens 2048 --num-gpu-blocks-override 256" ;;
    *) echo "unknown pair or side $1 $2" >&2; return 1 ;;
  esac
}

# load_of PAIR SIDE: record.py's load options, but --duration and --warmup. RATE stands for
# share_of × A's capacity measured by the pair's probe (probe_capacity.py).
load_of() {
  case "$1:$2" in
    traffic2:[AB] | maxseqs4to16:[AB]) echo "--rate RATE --seed $SEED ${MIX[*]} --max-in-flight $CAP" ;;
    kvpool4x:[AB] | kvpool15:[AB]) echo "--rate RATE --seed $SEED --class 1:300:600 --max-in-flight $CAP" ;;
    maxseqsdown:[AB]) echo "--rate RATE --seed $SEED --class 1:32:512 --max-in-flight $CAP" ;;
    budgetup:[AB]) echo "--rate 8 --seed $SEED --class 7:48:128 --class 3:800:64 --max-in-flight 64" ;;
    budget:[AB]) echo "--rate 8 --seed $SEED --class 7:64:128 --class 3:900:64 --max-in-flight 64" ;;
    *) echo "unknown pair or side $1 $2" >&2; return 1 ;;
  esac
}

# share_of PAIR SIDE: the side's rate as a share of A's capacity ("" = a fixed rate).
share_of() {
  case "$1:$2" in
    traffic2:A) echo 0.4 ;;
    traffic2:B | maxseqs4to16:[AB] | kvpool4x:[AB] | kvpool15:[AB]) echo 0.8 ;;
    maxseqsdown:[AB]) echo 0.2 ;;
    *) echo "" ;;
  esac
}

# probe_of PAIR: probe_capacity.py's options (a rate well above A's capacity, A's classes).
probe_of() {
  case "$1" in
    traffic2 | maxseqs4to16) echo "--rate 25 ${MIX[*]}" ;;
    kvpool4x | kvpool15) echo "--rate 6 --class 1:300:600" ;;
    maxseqsdown) echo "--rate 40 --class 1:32:512" ;;
    *) echo "" ;;
  esac
}

# rate_from CAPACITY_JSON SHARE: SHARE × the probed capacity, in req/s.
rate_from() {
  "$PROJECT_PY" -c 'import json, sys; c = json.load(open(sys.argv[1]))["capacity_rps"]
print(round(float(sys.argv[2]) * c, 2))' "$1" "$2"
}

# rate_of PAIR SIDE: the side's rate, once the pair's capacity.json exists.
rate_of() {
  local share
  share="$(share_of "$1" "$2")"
  [ -n "$share" ] || return 0
  rate_from "$OUT/$1/capacity.json" "$share"
}

# resolved_load PAIR SIDE: load_of with RATE filled in.
resolved_load() {
  local load rate
  load="$(load_of "$1" "$2")"
  rate="$(rate_of "$1" "$2")"
  echo "${load/RATE/$rate}"
}

# whatif_of PAIR: the `phasewatch whatif` arguments of A → B; --server: A's settings.
whatif_of() {
  case "$1" in
    traffic2) echo "--set rate_scale=2 --server max_num_seqs=4" ;;
    maxseqs4to16) echo "--set max_num_seqs=16 --server max_num_seqs=4" ;;
    kvpool4x) echo "--set num_gpu_blocks=64 --server max_num_seqs=16" ;;
    budget) echo "--set max_num_batched_tokens=256 --server max_num_seqs=16" ;;
    budgetup) echo "--set max_num_batched_tokens=1024 --server max_num_seqs=16" ;;
    kvpool15) echo "--set num_gpu_blocks=24 --server max_num_seqs=16" ;;
    maxseqsdown) echo "--set max_num_seqs=4 --server max_num_seqs=16" ;;
    *) echo "unknown pair $1" >&2; return 1 ;;
  esac
  # every pair: A's budget and model length (max_num_seqs above)
}
whatif_server_tail="--server max_num_batched_tokens=2048 --server max_model_len=1024"
# tail_of PAIR: A's budget and model length as --server flags.
tail_of() {
  case "$1" in
    budgetup) echo "--server max_num_batched_tokens=128 --server max_model_len=1024" ;;
    *) echo "$whatif_server_tail" ;;
  esac
}

# One setting, inside its own session:
#   record_pairs.sh --one VENV PY MODEL SIDE_DIR "RUNS" STEADY "LOAD" FLAGS...
if [ "${1:-}" = "--one" ]; then
  shift
  VENV="$1" PROJECT_PY="$2" MODEL_DIR="$3" DIR="$4" RUNS="$5" STEADY="$6" LOAD="$7"
  shift 7
  set -m  # background jobs get their own process group (in this same session)
  echo "=== $(date -u +%FT%TZ) start: $*" >>"$DIR/vllm.log"
  start_vllm "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$DIR/vllm.log" "$@"
  if [ -n "${CAPACITY_FILE:-}" ]; then  # a load sized as a share of A's capacity
    if [ ! -f "$CAPACITY_FILE" ]; then
      echo "probing A's capacity ($PROBE)"
      # shellcheck disable=SC2086  # the probe options are words
      "$PROJECT_PY" "$HERE/probe_capacity.py" "http://127.0.0.1:$PORT" $PROBE \
        --out "$CAPACITY_FILE.tmp" || exit 1
      mv "$CAPACITY_FILE.tmp" "$CAPACITY_FILE"
      sleep "$PAUSE"  # the cancelled probe requests leave the engine
    fi
    rate=$(rate_from "$CAPACITY_FILE" "$SHARE")
    LOAD="${LOAD/RATE/$rate}"
    echo "load at $SHARE of A's capacity: $rate req/s"
  fi
  status=0
  first=1
  for k in $RUNS; do
    [ "$first" = 1 ] || sleep "$PAUSE"  # the queue drains between runs
    first=0
    # shellcheck disable=SC2086  # the load options are words
    if ! "$PROJECT_PY" "$HERE/record.py" "http://127.0.0.1:$PORT" "$DIR/run$k" $LOAD \
      --warmup "$WARMUP" --duration "$STEADY" --vllm-flags "$*"; then
      echo "run $k: a request of the steady part failed (kept; see its meta.json summary)"
      status=1
    fi
  done
  exit $status
fi

usage="usage: record_pairs.sh VLLM_VENV PROJECT_PYTHON OUTDIR [--runs N] [--steady S] [--only PAIR[,PAIR]]"
VENV="${1:?$usage}"
PROJECT_PY="${2:?$usage}"
OUT="${3:?$usage}"
shift 3
RUNS_N=3
STEADY=240
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS_N="$2"; shift 2 ;;
    --steady) STEADY="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
PAIRS="$PAIRS_ALL"
if [ -n "$ONLY" ]; then
  PAIRS="${ONLY//,/ }"
  for p in $PAIRS; do whatif_of "$p" >/dev/null || exit 2; done
fi
t0=$(date +%s)
bash "$HERE/install.sh" "$VENV"
VENV="$(cd "$VENV" && pwd)"
MODEL_DIR="$VENV/phasewatch-tiny-llama"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_HOST_IP=127.0.0.1
"$VENV/bin/python" "$HERE/build_model.py" "$MODEL_DIR"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

# write_pair_json PAIR: what a reader (bench/whatif_vllm.py) needs to know of the pair; the
# rates once the pair's capacity is known.
write_pair_json() {
  local pair="$1"
  if [ -n "$(share_of "$pair" A)" ] && [ ! -f "$OUT/$pair/capacity.json" ]; then return 0; fi
  "$PROJECT_PY" - "$OUT/$pair/pair.json" "$pair" "$SEED" "$WARMUP" "$STEADY" "$PAUSE" \
    "$(flags_of "$pair" A) ${COMMON[*]}" "$(flags_of "$pair" B) ${COMMON[*]}" \
    "$(resolved_load "$pair" A)" "$(resolved_load "$pair" B)" \
    "$(whatif_of "$pair") $(tail_of "$pair")" "$OUT/$pair/capacity.json" <<'EOF'
import json
import os
import shlex
import sys

path, pair, seed, warmup, steady, pause, fa, fb, la, lb, wi, cap = sys.argv[1:]


def load(opts: str) -> dict:
    words = shlex.split(opts)
    out: dict = {"classes": []}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag == "--class":
            w, p, o = value.split(":")
            out["classes"].append(
                {"weight": float(w), "prompt_words": int(p), "output_tokens": int(o)}
            )
        else:
            key = flag.lstrip("-").replace("-", "_")
            out[key] = float(value) if key == "rate" else int(value)
    out["warmup"] = float(warmup)
    out["steady"] = float(steady)
    out["options"] = words
    return out


args = shlex.split(wi)
doc = {
    "pair": pair,
    "seed": int(seed),
    "pause_between_runs": float(pause),
    "A": {"flags": shlex.split(fa), "load": load(la)},
    "B": {"flags": shlex.split(fb), "load": load(lb)},
    "rate": {"A": load(la)["rate"], "B": load(lb)["rate"]},
    "whatif_args": args,
    "whatif_set": [v for f, v in zip(args[::2], args[1::2], strict=True) if f == "--set"],
    "whatif_server": [v for f, v in zip(args[::2], args[1::2], strict=True) if f == "--server"],
    "whatif_command": "phasewatch whatif A/run1 " + " ".join(args) + " --json",
}
if os.path.exists(cap):
    with open(cap) as f:
        doc["capacity"] = json.load(f)  # the probe of A these rates are shares of
with open(path, "w") as f:
    f.write(json.dumps(doc, indent=2) + "\n")
EOF
}

INNER=""
forward() { [ -n "$INNER" ] && kill -TERM "$INNER" 2>/dev/null; wait "$INNER" 2>/dev/null; exit 143; }
trap forward TERM INT
failed=""
for pair in $PAIRS; do
  mkdir -p "$OUT/$pair/A" "$OUT/$pair/B"
  write_pair_json "$pair"
  # Run k of A, then run k of B: the two sides of one run are minutes apart, so the
  # machine's drift over the hour is in both (a server start per side and run).
  for k in $(seq 1 "$RUNS_N"); do
    for side in A B; do
      dir="$OUT/$pair/$side"
      if [ -f "$dir/run$k/meta.json" ]; then
        echo "$pair $side run $k: already recorded"
        continue
      fi
      rm -rf "$dir/run$k"  # an interrupted run: record it again
      share="$(share_of "$pair" "$side")"
      capacity=""
      if [ -n "$share" ]; then
        capacity="$OUT/$pair/capacity.json"
        if [ "$side" = B ] && [ ! -f "$capacity" ]; then
          echo "$pair B: no capacity.json (A's probe did not run)"; exit 1
        fi
      fi
      echo "$pair $side: recording run $k ($(date -u +%T) UTC)"
      # shellcheck disable=SC2046  # the flags are words
      CAPACITY_FILE="$capacity" SHARE="$share" PROBE="$(probe_of "$pair")" \
        setsid bash "$0" --one "$VENV" "$PROJECT_PY" "$MODEL_DIR" "$dir" "$k" "$STEADY" \
        "$(load_of "$pair" "$side")" $(flags_of "$pair" "$side") "${COMMON[@]}" &
      INNER=$!
      if ! wait "$INNER"; then
        failed="$failed $pair/$side/run$k"
        echo "recording $pair $side run $k: not clean; the end of vLLM's log:"
        tail -20 "$dir/vllm.log"
      fi
      INNER=""
      [ -f "$dir/run$k/meta.json" ] || { echo "$pair $side run $k: no meta.json"; exit 1; }
      write_pair_json "$pair"
    done
  done
  if [ -f "$OUT/$pair/A/run1/meta.json" ] && [ -f "$OUT/$pair/B/run1/meta.json" ]; then
    "$PROJECT_PY" "$HERE/pack_pair.py" "$OUT/$pair" "$OUT/$pair.tar.gz"
  fi
done
echo "recorded in $(( $(date +%s) - t0 )) s into $OUT"
if [ -n "$failed" ]; then
  echo "not clean (a request failed or a run broke):$failed"
  exit 1
fi
