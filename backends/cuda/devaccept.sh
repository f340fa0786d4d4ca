#!/bin/sh
# The GPU acceptance of issue 12 in one device call (see NOTES.md). Built
# here first (no Go on the device machine), carried as .devbin:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/ ./cmd/compile ./cmd/exec ./cmd/synth
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .devbin/cuda.test ./backends/cuda/
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .devbin/tests.test ./tests/
#   CGO_ENABLED=0 go -C ../shared/tools/tracecmp build -o "$PWD/.devbin/tracecmp" .
# Run from the repository root: sh backends/cuda/devaccept.sh. Logs go to
# $OUT (at most 8 files come back): summary.txt (the table), cuda.log (the
# package's tests: kernels, conformance, whole models, memory), exec.log
# (traces, tracecmp, free runs), golden.log (issue 11: ./tests' golden tests
# at this CPU's AVX-512 level), sanitizer.log.
set -u
START=$(date +%s)
OUT=${OUT:-/tmp/devaccept}
mkdir -p "$OUT"
BIN=$(pwd)/.devbin
S=$OUT/summary.txt
E=$OUT/exec.log
row() { printf '%-44s %s\n' "$1" "$2" >>"$S"; }
nvidia-smi -L >"$S" 2>&1
grep -o 'avx512[a-z]*' /proc/cpuinfo | sort -u | tr '\n' ' ' >>"$S"; echo >>"$S"
# the golden helpers find the repository through the path they were built at
[ -e /work/main ] || { mkdir -p /work && ln -s "$(pwd)" /work/main; }

[ -x "$BIN/driver.test" ] && { (cd backends/cuda/driver && timeout 60 "$BIN/driver.test" -test.v -test.count=1) >"$OUT/driver.log" 2>&1; row "driver tests" "rc $?; $(grep -c '^--- PASS' "$OUT/driver.log") pass, $(grep -c -- '--- FAIL' "$OUT/driver.log") fail"; }
t0=$(date +%s)
(cd backends/cuda && timeout 200 "$BIN/cuda.test" -test.v -test.count=1 -test.timeout 190s) >"$OUT/cuda.log" 2>&1
rc=$?
row "cuda tests ($(($(date +%s)-t0))s)" "rc $rc; $(grep -c '^--- PASS' "$OUT/cuda.log") pass, $(grep -c -- '--- FAIL' "$OUT/cuda.log") fail, $(grep -c -- '--- SKIP' "$OUT/cuda.log") skip"
grep -E -- '--- FAIL|backend cuda: [0-9]+ cases' "$OUT/cuda.log" | head -20 >>"$S"

"$BIN/synth" -config testdata/unseen6/config.json -o /tmp/unseen6 -seed 1 >/dev/null 2>&1
for m in tiny unseen6; do
  dir=testdata/$m
  [ $m = unseen6 ] && dir=/tmp/unseen6
  "$BIN/compile" -model $dir -o /tmp/$m.plan >>"$E" 2>&1
  for be in cuda cpu-ref; do
    echo "== exec $m $be (trace)" >>"$E"
    t0=$(date +%s)
    timeout 120 "$BIN/exec" -plan /tmp/$m.plan -model $dir -backend $be -trace-in testdata/$m/golden.safetensors -trace-out /tmp/$m.$be.trace >>"$E" 2>&1
    row "exec -trace-in $m $be ($(($(date +%s)-t0))s)" "rc $?"
    echo "== tracecmp $m $be" >>"$E"
    "$BIN/tracecmp" testdata/$m/golden.safetensors /tmp/$m.$be.trace >>"$E" 2>&1
    row "tracecmp $m $be" "rc $?: $(tail -1 "$E")"
  done
  cmp /tmp/$m.cuda.trace /tmp/$m.cpu-ref.trace >>"$E" 2>&1 && row "trace $m: cuda vs cpu-ref" "byte-identical" || row "trace $m: cuda vs cpu-ref" "differ"
  for be in cuda cpu-ref; do
    echo "== exec $m $be (free run, greedy, 40 tokens)" >>"$E"
    timeout 120 "$BIN/exec" -plan /tmp/$m.plan -model $dir -backend $be -prompt-ids "3,14,15,92,65,35;8,97,93,23,84,62" -max-new-tokens 40 -temperature 0 -dump /tmp/$m.$be.free >>"$E" 2>&1
    row "exec free run $m $be" "rc $?"
  done
  cmp /tmp/$m.cuda.free /tmp/$m.cpu-ref.free >>"$E" 2>&1 && row "free run $m: cuda vs cpu-ref dump" "byte-identical" || row "free run $m: cuda vs cpu-ref dump" "differ"
done
echo "== exec tiny cuda, Engram tables in host memory (trace)" >>"$E"
DS4_CUDA_ENGRAM=host timeout 120 "$BIN/exec" -plan /tmp/tiny.plan -model testdata/tiny -backend cuda -trace-in testdata/tiny/golden.safetensors -trace-out /tmp/tiny.host.trace >>"$E" 2>&1
row "exec -trace-in tiny cuda, Engram on host" "rc $?"
cmp /tmp/tiny.host.trace /tmp/tiny.cpu-ref.trace >>"$E" 2>&1 && row "trace tiny (Engram on host) vs cpu-ref" "byte-identical" || row "trace tiny (Engram on host) vs cpu-ref" "differ"
echo "== exec -bench tiny cuda" >>"$E"
timeout 60 "$BIN/exec" -plan /tmp/tiny.plan -model testdata/tiny -backend cuda -bench -bench-prefill 1,128 -bench-decode 16 -probe-mb 0 >>"$E" 2>&1
row "exec -bench tiny cuda" "rc $?"
echo "== exec -backend cuda -max-memory 1K (refusal)" >>"$E"
"$BIN/exec" -plan /tmp/tiny.plan -model testdata/tiny -backend cuda -prompt-ids 1,2 -max-memory 1K >>"$E" 2>&1
row "exec -max-memory 1K" "rc $? (want 2)"

t0=$(date +%s)
timeout 60 compute-sanitizer --tool memcheck "$BIN/exec" -plan /tmp/tiny.plan -model testdata/tiny -backend cuda -trace-in testdata/tiny/golden.safetensors -trace-out /tmp/san.trace >"$OUT/sanitizer.log" 2>&1
row "memcheck exec tiny trace ($(($(date +%s)-t0))s)" "rc $?: $(grep 'ERROR SUMMARY' "$OUT/sanitizer.log" | tail -1)"

t0=$(date +%s)
[ "${SKIP_GOLDEN:-0}" = 1 ] && { cat "$S"; exit 0; }
left=$((${BUDGET_S:-400} - $(date +%s) + START))
[ $left -lt 30 ] && left=30
(cd tests && timeout $left "$BIN/tests.test" -test.run 'Golden|Unseen|OneCall' -test.v -test.count=1) >"$OUT/golden.log" 2>&1
rc=$?
row "tests Golden|Unseen|OneCall ($(($(date +%s)-t0))s)" "rc $rc; $(grep -c '^--- PASS' "$OUT/golden.log") pass, $(grep -c -- '--- FAIL' "$OUT/golden.log") fail, $(grep -c -- '--- SKIP' "$OUT/golden.log") skip"
grep -E -- '--- FAIL' "$OUT/golden.log" | head -10 >>"$S"
cat "$S"
