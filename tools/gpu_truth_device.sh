#!/usr/bin/env bash
# Fresh GPU check of replay and what-if against the untraced run (docs/whatif-validation.md,
# "fresh GPU check: how to run"): ONE short script for a session that has an H100/H200 for a few
# minutes. It records models that were never used to choose the profiler-cost method, each
# variant timed untraced (chakra.record.Recorder, before and after the traced steps) and traced
# (ET + Kineto), measures the GPU's matmul/copy peaks, then converts every run (trace alone and
# with its step time) and prints the predicted-vs-real tables.
#
#   tools/gpu_truth_device.sh                       # on the GPU machine: writes under $OUT
#   tools/gpu_truth_device.sh --device cpu --tiny   # the same end to end on a CPU box, tiny models
#   OUT=/tmp/x MODELS="resnet" tools/gpu_truth_device.sh --record-only
#
# Options: --device cuda|cpu (default cuda), --tiny (small resnet/bert), --record-only (skip the
# tables: convert here later with `python tools/truth_table.py $OUT/runs --jobs 8`).
# Environment: OUT (default out/gpu-truth), MODELS (default "resnet bert mlp"), PY (the Python with
# torch: default .venv/bin/python when there, else python3), JOBS (conversions at once, default 8),
# TIMED (untraced steps before the traced ones, default 30; 10 more after them).
#
# Budget on an H100 (planned, not yet run there): recording 3 models x 5 variants ~2-3 min,
# conversion and tables ~2-4 min with 8 jobs. The recordings land under $OUT/runs first, so a
# command stopped at its limit still returns them; convert here with tools/truth_table.py.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DEVICE=cuda
TINY=()
RECORD_ONLY=0
while [ $# -gt 0 ]; do
    case "$1" in
        --device) DEVICE="$2"; shift 2 ;;
        --tiny) TINY=(--tiny); shift ;;
        --record-only) RECORD_ONLY=1; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "gpu_truth_device.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
    esac
done
OUT=${OUT:-out/gpu-truth}
MODELS=${MODELS:-resnet bert mlp}
JOBS=${JOBS:-8}
TIMED=${TIMED:-30}
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT/runs"
OUT=$(cd "$OUT" && pwd)  # absolute: the package links below go on PYTHONPATH

if [ "$DEVICE" = cuda ]; then
    VARIANTS=(fp32 fused bf16 fp16 cudagraph)
    PEAKS=(--peaks)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true
else
    VARIANTS=(fp32 fused bf16)  # fp16 + GradScaler and CUDA graphs need CUDA
    PEAKS=()
fi
"$PY" -c 'import torch, sys; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "python", sys.version.split()[0])' | tee "$OUT/env.txt"

echo "== recording ($DEVICE): $MODELS x ${VARIANTS[*]}" >&2
start=$(date +%s)
# shellcheck disable=SC2086  # MODELS is a list of words
if ! "$PY" tools/record_truth.py --out "$OUT/runs" --device "$DEVICE" "${TINY[@]}" "${PEAKS[@]}" \
    --timed "$TIMED" --timed-after 10 --traced 3 $MODELS --variants "${VARIANTS[@]}" \
    2> "$OUT/record.log" | tee "$OUT/record.jsonl"; then
    grep -v -e '^\[W' -e '^USDT' "$OUT/record.log" | tail -20 >&2
    echo "== recording failed (log: $OUT/record.log); the runs finished so far are under $OUT/runs" >&2
    exit 1
fi
echo "== recorded in $(( $(date +%s) - start )) s" >&2

if [ "$RECORD_ONLY" = 1 ]; then
    exit 0
fi
# Without an install, the checkout's chakra/ lacks chakra.converters (setup.py maps the top-level
# converters/, visualizers/ and feeder/ into the package): lay the package out that way with
# links, which needs no build backend or index on the device machine.
# (The probes run from $OUT: `python -c` puts the working folder first on sys.path, where this
# checkout's own chakra/ would hide the links.)
if ! (cd "$OUT" && "$PY" -c 'import chakra.converters.pytorch' 2> /dev/null); then
    rm -rf "$OUT/pkg"
    mkdir -p "$OUT/pkg/chakra"
    ln -s "$PWD"/chakra/* "$OUT/pkg/chakra/"
    for sub in converters visualizers feeder; do ln -s "$PWD/$sub" "$OUT/pkg/chakra/$sub"; done
    export PYTHONPATH="$OUT/pkg:$PYTHONPATH"
fi
# The converter also needs the project's base packages (orjson, msgspec, ijson, jsonschema, ...);
# where they are missing the recordings under $OUT/runs are converted elsewhere.
if ! (cd "$OUT" && "$PY" -c 'import chakra.converters.pytorch, chakra.sim, chakra.whatif' 2> "$OUT/import.log"); then
    echo "== the converter does not import here ($(tail -1 "$OUT/import.log")): recordings kept under $OUT/runs;" \
         "convert them with: python tools/truth_table.py $OUT/runs --jobs 8" >&2
    exit 0
fi
echo "== converting and replaying" >&2
"$PY" tools/truth_table.py "$OUT/runs" --jobs "$JOBS" --json > "$OUT/table.json"
(cd "$OUT" && "$PY" - "$OUT/table.json" "$ROOT/tools" <<'EOF') | tee "$OUT/table.md"
import json, sys
sys.path.insert(0, sys.argv[2])
from truth_table import markdown
print(markdown(json.load(open(sys.argv[1]))))
EOF
echo "== done in $(( $(date +%s) - start )) s; files under $OUT" >&2
