#!/bin/sh
# Issue 13's device call (see NOTES.md): build the fatbin, run the package's
# tests against it (kernels, conformance, whole models, graphs, fusions),
# the decode/prefill kernel benchmarks with the copy bandwidth measured in
# the same run, and exec -bench on the synthetic full-width slice
# (bench/configs/slice.json) with CUDA graphs on and off. Built here first
# (no Go on the device machine), carried as .devbin:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/ ./cmd/exec
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .devbin/cuda.test ./backends/cuda/
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/ ./cmd/compile   # TRACE (default on)
#   CGO_ENABLED=0 go -C ../shared/tools/tracecmp build -o "$PWD/.devbin/tracecmp" .
# Run from the repository root: sh backends/cuda/devperf.sh. At most 8 files
# come back through $OUT: summary.txt, build.log, ds4.fatbin(.sha256),
# cuda.log (tests, then benchmarks), trace.log, slice.log, slice-graphs.json,
# slice-nographs.json (sass.txt with SASS="kernel ...", ncu.log with NCU="benchmark ..."). SKIP_BUILD=1 (the checked-in fatbin), SKIP_TESTS=1, SKIP_SLICE=1 and TRACE=0 leave parts out;
# TESTRUN, TESTSKIP and BENCH narrow the tests and benchmarks (-test.run, -test.skip, -test.bench).
set -u
OUT=${OUT:-/tmp/devperf}
mkdir -p "$OUT"
BIN=$(pwd)/.devbin
K=backends/cuda/kernels
S=$OUT/summary.txt
row() { printf '%-40s %s\n' "$1" "$2" >>"$S"; }
nvidia-smi -L >"$S" 2>&1
if [ "${SKIP_BUILD:-0}" != 1 ]; then  # SKIP_BUILD=1: the checked-in fatbin
  t0=$(date +%s)
  (sh $K/build.sh) >"$OUT/build.log" 2>&1
  row "fatbin build ($(($(date +%s)-t0))s)" "rc $?; $(grep -c 'spill' "$OUT/build.log") ptxas lines naming spills ($(grep -E '[1-9][0-9]* bytes spill' "$OUT/build.log" | wc -l) nonzero)"
  cp $K/ds4.fatbin $K/ds4.fatbin.sha256 "$OUT/"
fi
if [ -n "${SASS:-}" ]; then
  # the named kernels' SASS and every kernel's registers / shared memory
  cuobjdump -res-usage $K/ds4.fatbin >"$OUT/sass.txt" 2>&1
  for f in $SASS; do cuobjdump -sass -fun "$f" $K/ds4.fatbin >>"$OUT/sass.txt" 2>&1; done
  row "sass" "$(wc -l <"$OUT/sass.txt") lines"
fi
export DS4_CUDA_FATBIN=$(pwd)/$K/ds4.fatbin  # absolute: the tests run in backends/cuda, exec in the root
L=$OUT/cuda.log
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  t0=$(date +%s)
  (cd backends/cuda && timeout ${TESTS_S:-240} "$BIN/cuda.test" -test.v -test.count=1 -test.timeout ${TESTS_S:-240}s -test.run "${TESTRUN:-.}" -test.skip "${TESTSKIP:-^$}") >"$L" 2>&1
  rc=$?
  row "cuda tests ($(($(date +%s)-t0))s)" "rc $rc; $(grep -c '^--- PASS' "$L") pass, $(grep -c -- '--- FAIL' "$L") fail, $(grep -c -- '--- SKIP' "$L") skip"
  grep -E -- '--- FAIL' "$L" | head -20 >>"$S"
fi
t0=$(date +%s)
echo "== benchmarks" >>"$L"
(cd backends/cuda && timeout ${BENCH_S:-150} "$BIN/cuda.test" -test.run '^$' -test.bench "${BENCH:-Copy|Decode|TC}" -test.benchtime 50x) >>"$L" 2>&1
row "benchmarks ($(($(date +%s)-t0))s)" "rc $?"
grep -E '^Benchmark.*(GB/s|TFLOP)' "$L" | sed 's/  */ /g' | cut -c1-150 >>"$S"
if [ -n "${NCU:-}" ]; then
  # Nsight Compute on one launch of the decode kernels of each named
  # benchmark (NCU="DecodeFP8/wo_b_8192x5120_m1/mma ..."): speed of light,
  # warp stalls, occupancy, memory; the clocks left alone
  for b in $NCU; do
    echo "== ncu $b" >>"$OUT/ncu.log"
    (cd backends/cuda && timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --section SchedulerStats --section MemoryWorkloadAnalysis -k "regex:${NCU_KERNELS:-gemv_mma}" --launch-skip 5 --launch-count 1 \
      "$BIN/cuda.test" -test.run '^$' -test.bench "^Benchmark$b\$" -test.benchtime 10x) >>"$OUT/ncu.log" 2>&1
    row "ncu $b" "rc $?"
  done
fi
if [ "${TRACE:-1}" = 1 ] && [ -x "$BIN/tracecmp" ]; then
  # the golden teacher-forced trace of tiny on cuda (its decode steps take
  # the tensor-core products), compared as acceptance compares it
  T=$OUT/trace.log
  "$BIN/compile" -model testdata/tiny -o /tmp/tiny.plan >"$T" 2>&1
  # the fast kernels and the exact ones (the golden prefill, 2 × 29 rows,
  # is below the fp8 tensor-core products' 128 rows; the bf16 ones take it)
  for opt in cuda-exact=false cuda-exact=true; do
    timeout 120 "$BIN/exec" -plan /tmp/tiny.plan -model testdata/tiny -backend cuda -backend-opt $opt \
      -trace-in testdata/tiny/golden.safetensors -trace-out /tmp/tiny.$opt.trace >>"$T" 2>&1
    "$BIN/tracecmp" testdata/tiny/golden.safetensors /tmp/tiny.$opt.trace >>"$T" 2>&1
    row "tracecmp tiny cuda $opt" "rc $?: $(tail -1 "$T")"
  done
fi
if [ "${SKIP_SLICE:-0}" != 1 ]; then
  for g in ${GRAPHS:-true false}; do
    f=slice-graphs; [ $g = false ] && f=slice-nographs
    echo "== exec -bench slice, cuda-graphs=$g" >>"$OUT/slice.log"
    t0=$(date +%s)
    timeout ${SLICE_S:-200} "$BIN/exec" -bench -synthetic -config bench/configs/slice.json -backend cuda -cuda-graphs=$g \
      -bench-floor-gbs 4300 -bench-prefill "${PREFILL:-1024,8192}" -bench-context 128 -bench-decode 32 -bench-repeats 1 \
      -probe-mb 2048 ${SLICE_FLAGS:-} -json >"$OUT/$f.json" 2>>"$OUT/slice.log"
    row "exec -bench slice graphs=$g ($(($(date +%s)-t0))s)" "rc $?"
    PREFILL=1  # the second run times decode only
  done
  grep -E 'synthetic weights|error' "$OUT/slice.log" | head -5 >>"$S"
fi
cat "$S"
