#!/bin/sh
# The released widths on the GPU (see NOTES.md): a 4-layer checkpoint with
# the flash config's dims (dim 5120, 64 heads of 512, q_lora 1280, wo_a 8
# groups → 1024, window 128, index 32 × 128 top-512, candidate blocks
# 2048 of 8, Engram 8 × 256, 6 of 16 experts of 2304) made by synth on
# the device from testdata/wide4.config.json (seed 3), run greedy on cuda and
# compared with the dump cpu-ref made of the same checkpoint off the device
# (testdata/wide4.cpu-ref.dump: about 3 minutes on two cores, too slow for a lease):
#   go run ./cmd/synth -config backends/cuda/testdata/wide4.config.json -o /tmp/wide -seed 3
#   go run ./cmd/compile -model /tmp/wide -o /tmp/wide.plan
#   go run ./cmd/exec -plan /tmp/wide.plan -model /tmp/wide -backend cpu-ref \
#     -prompt-ids "3,14,15,92,65,35,89,79;8,97,93,23,84,62,64,33" -max-new-tokens 4 -temperature 0 -dump backends/cuda/testdata/wide4.cpu-ref.dump
set -u
OUT=${OUT:-/tmp/devwide}
mkdir -p "$OUT"
BIN=$(pwd)/.devbin
{
t0=$(date +%s)
"$BIN/synth" -config backends/cuda/testdata/wide4.config.json -o /tmp/wide -seed 3 2>&1 | tail -1
"$BIN/compile" -model /tmp/wide -o /tmp/wide.plan
echo "synth + compile: $(($(date +%s)-t0)) s"
t0=$(date +%s)
timeout 150 "$BIN/exec" -plan /tmp/wide.plan -model /tmp/wide -backend cuda -prompt-ids "3,14,15,92,65,35,89,79;8,97,93,23,84,62,64,33" \
  -max-new-tokens 4 -temperature 0 -dump /tmp/wide.cuda.dump 2>&1 | tail -4
echo "exec cuda: rc $? in $(($(date +%s)-t0)) s"
cmp /tmp/wide.cuda.dump backends/cuda/testdata/wide4.cpu-ref.dump && echo "wide: the cuda dump is byte-identical to cpu-ref's" || echo "wide: the dumps differ"
} 2>&1 | tee "$OUT/wide.log"
cp /tmp/wide.cuda.dump "$OUT/" 2>/dev/null
