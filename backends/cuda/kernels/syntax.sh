#!/bin/sh
# Syntax- and type-checks ds4.cu (every .cuh it includes) without nvcc:
# clang-14 in CUDA device mode (sm_80, the newest clang-14 knows; the build is sm_90a) against shim/cuda_shim.h, a small
# stand-in for the CUDA headers. Catches what a parse catches (typos,
# undeclared names, wrong argument types, missing includes), not what only
# ptxas sees (registers, spills). Run before every kernel change:
#   sh backends/cuda/kernels/syntax.sh [file.cu ...]   # default ds4.cu
set -eu
cd "$(dirname "$0")"
CLANG=${CLANG:-clang-14}
command -v "$CLANG" >/dev/null || { echo "syntax.sh: $CLANG not found (apt-get install -y clang-14)" >&2; exit 2; }
[ $# -gt 0 ] || set -- ds4.cu
for f in "$@"; do
  "$CLANG" -x cuda --cuda-device-only --cuda-gpu-arch=sm_80 -nocudainc -nocudalib \
    -std=c++17 -fsyntax-only -Wall -Wno-unused-function -Wno-unknown-cuda-version \
    -include shim/cuda_shim.h "$f"
done
echo "syntax.sh: ok ($*)"
