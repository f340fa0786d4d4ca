#!/bin/sh
# Where a decode step's GPU time goes (issue 13), on the device machine:
# Nsight Compute over slice-small's step with plain launches (every kernel's
# name, grid, block, registers and duration) and the detailed sections for
# one launch of each kernel named in DEEP (a regex each). (Graphs profiled
# whole, --graph-profiling graph, read 3-10x the kernels' time on the H200:
# not a measure of them.) Built here first (no
# Go on the device machine), carried as .devbin (exec.gz). Run from the
# repository root: sh backends/cuda/devprof.sh; everything goes to
# $OUT/prof.tgz, a summary is printed last.
set -u
OUT=${OUT:-/tmp/devprof}
. backends/cuda/devbin.sh
CFG=${CFG:-bench/configs/slice-small.json}
# the step under ncu: prefill 1 token, then 2 decode steps
step() { echo "$BIN/exec -bench -synthetic -config $CFG -backend cuda -cuda-graphs=$1 -bench-prefill 1 -bench-context 128 -bench-decode 2 -bench-repeats 1 -probe-mb 0"; }
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
timeout 240 ncu --clock-control none --cache-control none --metrics $M --csv --print-units base \
  --log-file "$OUT/plain.csv" $(step false) >"$OUT/plain.log" 2>&1
echo "plain rc $?" >"$OUT/summary.txt"
for k in ${DEEP:-}; do
  echo "== $k" >>"$OUT/deep.log"
  timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --section SourceCounters -k "regex:$k" --launch-skip ${DEEP_SKIP:-40} --launch-count 1 \
    $(step false) >>"$OUT/deep.log" 2>&1
  echo "deep $k rc $?" >>"$OUT/summary.txt"
done
(cd "$OUT" && tar czf prof.tgz *.csv *.log summary.txt && rm -f *.csv *.log)
cat "$OUT/summary.txt"
