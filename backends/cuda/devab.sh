#!/bin/sh
# A/B of two exec binaries on the device machine: the host's launch cost
# (BenchmarkLaunchEmpty, each launch binding the context and launches inside
# Stream.Bound), then slice-small's plain decode step with each binary,
# interleaved ROUNDS times (runs of one binary move by up to 0.4 ms between
# processes, so only interleaved pairs compare). Built here first (no Go on
# the device machine), carried as .devbin:
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/ ./cmd/exec      # after
#   (a checkout of the base) CGO_ENABLED=0 go build -ldflags='-s -w' -o .devbin/exec-before ./cmd/exec
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .devbin/cuda.test ./backends/cuda/
# AFTER_FATBIN=FILE: the "after" runs load that image (a fatbin built in
# the same call) instead of the one embedded in their binary.
# Run from the repository root: sh backends/cuda/devab.sh. Everything goes to
# $OUT/ab.tgz (a call brings back at most 8 files); the table is printed last.
set -u
OUT=${OUT:-/tmp/devab}
. backends/cuda/devbin.sh
S=$OUT/ab.txt
(cd backends/cuda && timeout 30 "$BIN/cuda.test" -test.run '^$' -test.bench LaunchEmpty -test.benchtime 20000x) 2>&1 | grep '^Bench' >"$S"
for i in $(seq "${ROUNDS:-2}"); do
  for v in after before; do
    e=$BIN/exec fb=${AFTER_FATBIN:-}
    [ $v = before ] && e=$BIN/exec-before fb=
    DS4_CUDA_FATBIN=$fb timeout 60 "$e" -bench -synthetic -config bench/configs/slice-small.json -backend cuda -cuda-graphs=false \
      -bench-prefill 1 -bench-context 128 -bench-decode 128 -bench-repeats 1 -probe-mb 0 -json >"$OUT/$v-$i.json" 2>>"$OUT/ab.log"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%-7s round %s: %.3f ms a step' % (sys.argv[2], sys.argv[3], 1e3*d['decode_seconds']/d['decode_steps']))" \
      "$OUT/$v-$i.json" $v $i >>"$S" 2>&1
  done
done
(cd "$OUT" && tar czf ab.tgz ab.txt ab.log *.json && rm -f ab.log *.json)
cat "$S"
