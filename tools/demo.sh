#!/usr/bin/env bash
# `make demo`: the main job on a bundled real trace. A 2-rank PyTorch DDP training run (gloo,
# PyTorch 2.13, Execution Trace + Kineto) -> Chakra -> checked -> replayed -> drawn.
set -euo pipefail
CHAKRA="$1"; SAMPLES="$2"; OUT="$3"
DDP="$SAMPLES/pytorch/ddp2"
CONFIGS="$(dirname "$0")/../chakra/data/configs"
mkdir -p "$OUT"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. convert the PyTorch ET + Kineto traces of both ranks (linked, in parallel)"
"$CHAKRA" convert pytorch "$DDP/et.0.json" "$DDP/et.1.json" -k "$DDP/kineto.0.json" -k "$DDP/kineto.1.json" -o "$OUT/ddp2"

step "2. validate: each rank, and across ranks (collective sequences, process groups)"
"$CHAKRA" validate "$OUT/ddp2"

step "3. statistics per rank"
"$CHAKRA" stats "$OUT/ddp2"

step "4. replay with the recorded durations (should match the measured step)"
"$CHAKRA" simulate "$OUT/ddp2" --comm replay --system "$CONFIGS/system.json" --log "$OUT/ddp2.replay.csv"

step "5. what if the all-reduces ran on a 50 GB/s, 500 ns ring (ASTRA-sim's analytical network model)?"
"$CHAKRA" simulate "$OUT/ddp2" --system "$CONFIGS/system.json" --log "$OUT/ddp2.sim.csv"

step "6. draw rank 0's dependency graph and the simulated timeline"
"$CHAKRA" visualize "$OUT/ddp2.0.et" -o "$OUT/ddp2.0.pdf"
"$CHAKRA" timeline "$OUT/ddp2.replay.csv" --trace "$OUT/ddp2" -o "$OUT/ddp2.timeline.json"

step "done"
echo "traces:   $OUT/ddp2.0.et $OUT/ddp2.1.et"
echo "graph:    $OUT/ddp2.0.pdf"
echo "timeline: $OUT/ddp2.timeline.json  (open https://ui.perfetto.dev and drop the file in, or chrome://tracing)"
