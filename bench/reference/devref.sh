#!/bin/sh
# Issue 13, deliverable 7: DeepSeek's reference and ds4 side by side on the same GPU and the same
# checkpoint, in one device call. Run from the repository root on the device machine (the run
# tool, carry [".devbin"]):
#
#   sh bench/reference/devref.sh
#
# It needs, in .devbin (built here; no Go there): synth, compile and exec (plain or .gz), and the
# reference files in .devbin/ref/deepseek_v41/ (bench/reference/README.md says which and how).
# Steps: gemm_check.py (the cuBLAS GEMM mode against the port's GEMMs, real fp8/fp4 dtypes); the
# reference's block-local check against testdata/tiny's golden data (cuda, then cpu);
# synth writes the checkpoint of $CONFIG into $CKPT (skipped when the same config is already
# there); run_ref.py times the reference on it (cuBLAS GEMMs, then the golden recipe's port
# kernels); exec -bench -backend cuda times ds4 on the same files; the table comes last.
# Files in $OUT: summary.txt (the table), devref.log (every command's stderr), gemm.log,
# check.jsonl, ref.jsonl, ds4.json.
#
# Knobs (environment): CONFIG (bench/configs/slice.json; when the disk under $CKPT has less than
# NEED_GB free it falls back to bench/configs/slice-small.json and says so), CKPT
# (/tmp/devref-ckpt), PREFILL (1024), CONTEXT (prompt before the timed decode; PREFILL),
# DECODE (16 reference steps), DS4_DECODE (32), KERNELS (both | cublas | port), SKIP_CHECK=1,
# KEEP_CKPT (1; 0 deletes the checkpoint at the end), PYTHON (python3), BIN (.devbin), REF_S /
# DS4_S (timeouts of the two runs, 330 / 200 s).
set -u
START=$(date +%s)
OUT=${OUT:-/tmp/devref}
mkdir -p "$OUT"
S=$OUT/summary.txt
L=$OUT/devref.log
: >"$S"
: >"$L"
: >"$OUT/check.jsonl"
BIN=${BIN:-$(pwd)/.devbin}
PY=${PYTHON:-python3}
CONFIG=${CONFIG:-bench/configs/slice.json}
CKPT=${CKPT:-/tmp/devref-ckpt}
PREFILL=${PREFILL:-1024}
CONTEXT=${CONTEXT:-$PREFILL}
DECODE=${DECODE:-16}
DS4_DECODE=${DS4_DECODE:-32}
KERNELS=${KERNELS:-both}
row() { printf '%-44s %s\n' "$1" "$2" >>"$S"; }
el() { echo "$(($(date +%s) - START))s"; }

# a binary of .devbin, unpacked to /tmp/devref-bin when it was carried gzipped
tool() {
  if [ -x "$BIN/$1" ]; then echo "$BIN/$1"; return; fi
  if [ -f "$BIN/$1.gz" ]; then
    mkdir -p /tmp/devref-bin
    [ -x "/tmp/devref-bin/$1" ] || { gunzip -c "$BIN/$1.gz" >"/tmp/devref-bin/$1" && chmod +x "/tmp/devref-bin/$1"; }
    echo "/tmp/devref-bin/$1"; return
  fi
  echo "devref: .devbin/$1 (or $1.gz) is missing" >&2
  echo false
}
SYNTH=$(tool synth)
COMPILE=$(tool compile)
EXEC=$(tool exec)

nvidia-smi -L >>"$S" 2>&1
row "python / torch" "$($PY -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda)' 2>&1 | tail -1)"
if [ ! -f "$BIN/ref/deepseek_v41/model.py" ]; then
  row "reference files" "MISSING: .devbin/ref/deepseek_v41 (bench/reference/README.md)"
  cat "$S"
  exit 2
fi
row "reference sha256" "$(cd "$BIN/ref/deepseek_v41" && sha256sum model.py kernel_cpu.py engram.py | cut -c1-12 | tr '\n' ' ')"

if [ "${SKIP_CHECK:-0}" != 1 ]; then
  t0=$(date +%s)
  timeout 120 $PY bench/reference/gemm_check.py --device cuda --ref "$BIN/ref" >"$OUT/gemm.log" 2>&1
  rc=$?
  row "cuBLAS mode vs port GEMMs ($(($(date +%s) - t0))s)" "rc $rc: $(tail -1 "$OUT/gemm.log")"
  for dev in cuda cpu; do
    k=both; th=""
    [ $dev = cpu ] && { k=port; th="--threads 1"; }
    echo "== check tiny $dev" >>"$L"
    t0=$(date +%s)
    timeout 180 $PY bench/reference/run_ref.py --ref "$BIN/ref" --model testdata/tiny --check testdata/tiny/golden.safetensors \
      --device $dev --kernels $k $th >>"$OUT/check.jsonl" 2>>"$L"
    rc=$?
    row "reference check tiny $dev ($(($(date +%s) - t0))s)" "rc $rc"
  done
  $PY - "$OUT/check.jsonl" >>"$S" 2>>"$L" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    keys = ("stream_out_rel", "engram_out_rel", "logits_rel", "gate_rows_identical", "index_rows_identical",
            "free_prefill_logits_rel", "free_greedy_ids_equal")
    print(f"  {d['check']:4} {d['kernels']:6} {d['device'][:22]:22} " + " ".join(f"{k}={d.get(k)}" for k in keys))
EOF
fi

# the checkpoint: the full slice when the disk holds it, else the small one
dir=$(dirname "$CKPT")
mkdir -p "$dir"
avail=$(($(df -Pk "$dir" | awk 'NR==2 {print $4}') / 1048576))
need=${NEED_GB:-58}
stamp="$CONFIG $(sha256sum "$CONFIG" | cut -c1-16)"
if [ "$(cat "$CKPT/.devref-config" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$CKPT"
  avail=$(($(df -Pk "$dir" | awk 'NR==2 {print $4}') / 1048576))
  if [ "$CONFIG" = bench/configs/slice.json ] && [ "$avail" -lt "$need" ]; then
    row "disk under $dir" "${avail} GB free < ${need} GB: using bench/configs/slice-small.json"
    CONFIG=bench/configs/slice-small.json
    stamp="$CONFIG $(sha256sum "$CONFIG" | cut -c1-16)"
  fi
  t0=$(date +%s)
  "$SYNTH" -config "$CONFIG" -o "$CKPT" -seed 1 >>"$L" 2>&1
  rc=$?
  row "synth $CONFIG ($(($(date +%s) - t0))s)" "rc $rc: $(tail -1 "$L")"
  [ $rc = 0 ] && echo "$stamp" >"$CKPT/.devref-config"
else
  row "checkpoint" "reused $CKPT ($CONFIG)"
fi

echo "== run_ref" >>"$L"
t0=$(date +%s)
timeout "${REF_S:-330}" $PY bench/reference/run_ref.py --ref "$BIN/ref" --model "$CKPT" --device cuda --prefill "$PREFILL" \
  --context "$CONTEXT" --decode "$DECODE" --kernels "$KERNELS" >"$OUT/ref.jsonl" 2>>"$L"
rc=$?
row "run_ref ($(($(date +%s) - t0))s, at $(el))" "rc $rc: $(grep 'loaded in' "$L" | tail -1 | cut -c10-)"

echo "== ds4 exec -bench" >>"$L"
t0=$(date +%s)
"$COMPILE" -model "$CKPT" -o /tmp/devref.plan >>"$L" 2>&1
timeout "${DS4_S:-200}" "$EXEC" -plan /tmp/devref.plan -model "$CKPT" -backend cuda -bench -json \
  -bench-prefill "$PREFILL" -bench-context "$CONTEXT" -bench-decode "$DS4_DECODE" -bench-repeats 1 \
  -probe-mb 0 -bench-floor-gbs 4300 >"$OUT/ds4.json" 2>>"$L"
rc=$?
row "ds4 exec -bench cuda ($(($(date +%s) - t0))s, at $(el))" "rc $rc"
[ "${KEEP_CKPT:-1}" = 0 ] && rm -rf "$CKPT"

$PY - "$OUT/ref.jsonl" "$OUT/ds4.json" "$CONFIG" >>"$S" 2>>"$L" <<'EOF'
import json, sys
ref = {}
try:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        ref[d["kernels"]] = d
except (OSError, ValueError) as e:
    print(f"reference: no figures ({e})")
try:
    ds4 = json.load(open(sys.argv[2]))
except (OSError, ValueError) as e:
    ds4 = None
    print(f"ds4: no figures ({e})")
pre = dec = None
if ds4:
    pre = max(ds4.get("prefill") or [{}], key=lambda p: p.get("tokens", 0)).get("tokens_per_s")
    dec = ds4.get("decode_tokens_per_s")
any_ref = next(iter(ref.values()), {})
print()
print(f"side by side on {any_ref.get('device', '?')}, checkpoint {sys.argv[3]} "
      f"({any_ref.get('checkpoint_gb', '?')} GB), batch 1")
print(f"{'figure':34} {'ds4 cuda':>12} {'ref cublas':>12} {'ratio':>8} {'ref port':>12} {'ratio':>8}")
def cell(v):
    return f"{v:12.2f}" if isinstance(v, (int, float)) else f"{'-':>12}"
def ratio(a, b):
    return f"{a / b:7.1f}x" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else f"{'-':>8}"
c, p = ref.get("cublas", {}), ref.get("port", {})
n = any_ref.get("prefill_tokens", "?")
ctx = any_ref.get("decode_context", "?")
print(f"{'prefill ' + str(n) + ' tokens, tok/s':34} {cell(pre)} {cell(c.get('prefill_tok_s'))} "
      f"{ratio(pre, c.get('prefill_tok_s'))} {cell(p.get('prefill_tok_s'))} {ratio(pre, p.get('prefill_tok_s'))}")
print(f"{'decode after ' + str(ctx) + ', tok/s':34} {cell(dec)} {cell(c.get('decode_tok_s'))} "
      f"{ratio(dec, c.get('decode_tok_s'))} {cell(p.get('decode_tok_s'))} {ratio(dec, p.get('decode_tok_s'))}")
EOF
cat "$S"
