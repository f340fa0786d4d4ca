#!/bin/sh
# Interleaved arms of slice-small's plain decode step on the device machine:
# each arm is NAME=ENV (VAR=VALUE pairs joined by '+',
# "-" for none; GRAPHS=1 among them turns CUDA graphs on), run ROUNDS times in turn with .devbin/exec (runs of one
# setting move by up to 0.4 ms between processes, so only interleaved arms
# compare). Example:
#   ARMS="plain=- one=DS4_CUDA_PNQ_SPLIT=0 new=DS4_CUDA_FATBIN=$PWD/x.fatbin g=GRAPHS=1+DS4_CUDA_GRAPH_CHUNKS=16,128" sh backends/cuda/devarms.sh
# CONFIG names another bench/configs file (slice for the full-width slice,
# whose synthetic weights take longer: RUN_S, 60 s a run by default).
# Prints a line a run and each arm's median last; the JSON reports go to
# $OUT/arms.tgz.
set -u
OUT=${OUT:-/tmp/devarms}
. backends/cuda/devbin.sh
mkdir -p /tmp/arms
S=/tmp/arms/arms.txt
: >"$S"
for i in $(seq "${ROUNDS:-3}"); do
  for arm in $ARMS; do
    name=${arm%%=*} envs=${arm#*=} g=false
    [ "$envs" = - ] && envs=
    case "+$envs+" in *+GRAPHS=1+*) g=true ;; esac
    env $(echo "$envs" | tr '+' ' ') timeout ${RUN_S:-60} "$BIN/exec" -bench -synthetic -config bench/configs/${CONFIG:-slice-small}.json -backend cuda \
      -cuda-graphs=$g -bench-prefill 1 -bench-context 128 -bench-decode ${STEPS:-64} -bench-repeats 1 -probe-mb 0 -json \
      >"/tmp/arms/$name-$i.json" 2>>/tmp/arms/arms.log
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%s %.3f' % (sys.argv[2], 1e3*d['decode_seconds']/d['decode_steps']))" \
      "/tmp/arms/$name-$i.json" "$name" >>"$S" 2>>/tmp/arms/arms.log
    cp "$S" "$OUT/arms.txt" # what is done so far, should the call run out of time
  done
done
python3 - "$S" <<'PY' >>"$S"
import sys, statistics, collections
a = collections.OrderedDict()
for l in open(sys.argv[1]):
    n, v = l.split()
    a.setdefault(n, []).append(float(v))
for n, v in a.items():
    print('%-10s median %.3f ms a step (%s)' % (n, statistics.median(v), ', '.join('%.3f' % x for x in v)))
PY
(cd /tmp/arms && tar czf "$OUT/arms.tgz" .)
cat "$S"
