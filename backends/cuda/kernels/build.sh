#!/bin/sh
# Builds ds4.fatbin from ds4.cu and records the SHA-256 of the sources and of
# the fatbin in ds4.fatbin.sha256 (TestEmbeddedFatbinMatchesSources checks
# both). Run on a machine with CUDA 13.0's nvcc (the device machine):
#   sh backends/cuda/kernels/build.sh
# -fmad=false keeps a*b+c two roundings, as the Go reference computes it;
# division and square root stay IEEE (nvcc's defaults, no fast math).
set -eu
export LC_ALL=C
cd "$(dirname "$0")"
nvcc --version | tail -n 2
nvcc -fatbin -O3 -std=c++17 -fmad=false -Xptxas -v \
  -gencode=arch=compute_90a,code=sm_90a \
  -gencode=arch=compute_90,code=compute_90 \
  -o ds4.fatbin ds4.cu
sha256sum build.sh *.cu *.cuh >ds4.fatbin.sha256
sha256sum ds4.fatbin >>ds4.fatbin.sha256
cat ds4.fatbin.sha256
