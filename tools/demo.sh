#!/usr/bin/env bash
# The main job on bundled real traces; grows as the toolchain grows.
set -euo pipefail
CHAKRA="$1"; SAMPLES="$2"; OUT="$3"
mkdir -p "$OUT"
echo "== ASTRA-sim's own 8-rank all-reduce microbenchmark: stats and cross-rank validation"
"$CHAKRA" stats "$SAMPLES/astrasim/all_reduce_8npus_1MB/all_reduce"
"$CHAKRA" validate "$SAMPLES/astrasim/all_reduce_8npus_1MB/all_reduce"
echo "== lossless JSON round trip of rank 0"
"$CHAKRA" jsonize "$SAMPLES/astrasim/all_reduce_8npus_1MB/all_reduce.0.et" -o "$OUT/all_reduce.0.json"
"$CHAKRA" dejsonize "$OUT/all_reduce.0.json" -o "$OUT/all_reduce_rt.0.et"
cmp "$SAMPLES/astrasim/all_reduce_8npus_1MB/all_reduce.0.et" "$OUT/all_reduce_rt.0.et" && echo "byte-identical"
