#!/bin/sh
# One call on the device machine (see NOTES.md): build the fatbin, run the
# driver and kernel tests against it, the benchmarks, and compute-sanitizer's
# memcheck and racecheck over the kernel tests. Expects the test binaries
# built here first (CGO_ENABLED=0, the run tool carrying .devbin):
#   CGO_ENABLED=0 go test -c -o .devbin/cuda.test ./backends/cuda/
#   CGO_ENABLED=0 go test -c -o .devbin/driver.test ./backends/cuda/driver/
# and is run from the repository root as: sh backends/cuda/devcheck.sh
# With EMBEDDED=1 it skips the build and tests the fatbin embedded in the
# test binary. Logs and the fatbin go to $OUT.
set -u
OUT=${OUT:-/tmp/devcheck}
mkdir -p "$OUT"
K=backends/cuda/kernels
BIN=$(pwd)/.devbin
nvidia-smi -L
if [ "${EMBEDDED:-0}" != 1 ]; then
  (sh $K/build.sh && cuobjdump --list-elf --list-ptx $K/ds4.fatbin) >"$OUT/build.log" 2>&1
  echo "build: rc $?"
  cp $K/ds4.fatbin $K/ds4.fatbin.sha256 "$OUT/"
  export DS4_CUDA_FATBIN=kernels/ds4.fatbin
fi
(cd backends/cuda/driver && "$BIN/driver.test" -test.v) >"$OUT/driver.log" 2>&1
echo "driver tests: rc $?"
cd backends/cuda
timeout 300 "$BIN/cuda.test" -test.v -test.count=1 >"$OUT/kernels.log" 2>&1
echo "kernel tests: rc $?"
if [ "${EMBEDDED:-0}" != 1 ]; then
  timeout 200 "$BIN/cuda.test" -test.run '^$' -test.bench . -test.benchtime 200x >"$OUT/bench.log" 2>&1
  echo "benchmarks: rc $?"
  (timeout 240 compute-sanitizer --tool memcheck "$BIN/cuda.test" -test.run GPU -test.count=1 2>&1 | tail -30
   timeout 200 compute-sanitizer --tool racecheck "$BIN/cuda.test" -test.run 'SparseAttn|MatmulFP8|Routed|RMSNorm|Gate' -test.count=1 2>&1 | tail -30) >"$OUT/sanitizer.log" 2>&1
  echo "sanitizer: rc $?"
fi
