#!/bin/sh
# Issue 13, on the device machine: where a decode step's GPU waits. (1)
# slice-small's step with plain launches and with graphs, with and without
# DS4_CUDA_TIMELINE=1 (timeline.go: host and GPU microseconds at each graph
# chunk's boundary, medians over the calls), ROUNDS interleaved rounds;
# (2) Nsight Compute's full sections and per-instruction warp-stall samples
# (the source page, SASS) for one launch of each kernel in KERNELS (regex)
# of slice-small's step, and of the benchmarks in BENCHES
# (name=benchmark-regex=kernel-regex). PROF=1: a host CPU profile of each
# step run (-cpuprofile). Built here first, carried as .devbin
# (exec.gz, cuda.test.gz). Run from the repository root:
#   sh backends/cuda/devtimeline.sh
# Everything goes to $OUT/tl.tgz; the step times and the timelines' last
# boundaries are printed last.
set -u
OUT=${OUT:-/tmp/devtl}
. backends/cuda/devbin.sh
W=/tmp/devtl.work
rm -rf "$W" && mkdir -p "$W"
S=$W/summary.txt
: >"$S"
CFG=${CFG:-bench/configs/slice-small.json}
step() { # name graphs ENV=V...: one process, decode of STEPS steps after 128 tokens
  n=$1 g=$2
  shift 2
  env "$@" timeout 120 "$BIN/exec" -bench -synthetic -config "$CFG" -backend cuda -cuda-graphs="$g" -bench-prefill 1 \
    -bench-context 128 -bench-decode "${STEPS:-64}" -bench-repeats 1 -probe-mb 0 -json ${PROF:+-cpuprofile "$W/$n.prof"} >"$W/$n.json" 2>"$W/$n.err"
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%-12s %.3f ms a step' % (sys.argv[2], 1e3*d['decode_seconds']/d['decode_steps']))" \
    "$W/$n.json" "$n" >>"$S" 2>>"$W/py.err" || echo "$n failed" >>"$S"
}
if [ "${SKIP_TL:-0}" != 1 ]; then
  for r in $(seq "${ROUNDS:-2}"); do
    step plain-$r false DS4_CUDA_TIMELINE=0
    step graphs-$r true DS4_CUDA_TIMELINE=0
    step plainTL-$r false DS4_CUDA_TIMELINE=1
    step graphsTL-$r true DS4_CUDA_TIMELINE=1
  done
fi
prof() { # name: the report, its details and its SASS source page
  ncu -i "$W/$1.ncu-rep" --page details >"$W/$1.details.txt" 2>&1
  ncu -i "$W/$1.ncu-rep" --page source --csv --print-source sass >"$W/$1.sass.csv" 2>&1
  echo "ncu $1: $(grep -c . "$W/$1.sass.csv") source lines" >>"$S"
}
for k in ${KERNELS:-}; do
  timeout 150 ncu --clock-control none --set full --import-source no -k "regex:$k" --launch-skip ${SKIP_N:-40} --launch-count 1 \
    -o "$W/$k" -f "$BIN/exec" -bench -synthetic -config "$CFG" -backend cuda -cuda-graphs=false -bench-prefill 1 \
    -bench-context 128 -bench-decode 2 -bench-repeats 1 -probe-mb 0 >"$W/$k.log" 2>&1
  prof "$k"
done
for b in ${BENCHES:-}; do
  n=${b%%=*} rest=${b#*=}
  bench=${rest%%=*} kern=${rest#*=}
  (cd backends/cuda && timeout 150 ncu --clock-control none --set full --import-source no -k "regex:$kern" --launch-skip 10 --launch-count 1 \
    -o "$W/$n" -f "$BIN/cuda.test" -test.run '^$' -test.bench "$bench" -test.benchtime 20x) >"$W/$n.log" 2>&1
  prof "$n"
done
(cd "$W" && tar czf "$OUT/tl.tgz" --exclude='*.ncu-rep' .)
cat "$S"
for f in "$W"/*TL-1.err; do [ -f "$f" ] && { echo "== $f"; grep timeline: "$f" | tail -40; }; done
