// The CUDA backend's kernels: one translation unit, built by build.sh into
// ds4.fatbin (sm_90a machine code plus compute_90 PTX) and embedded in the
// Go package. Each kernel mirrors a reference kernel of backends/cpu/kernels
// (named in its comment) with the same rounding points.
#include "common.cuh"
#include "norm_quant.cuh"
#include "gemm.cuh"
#include "gemv.cuh"
#include "elementwise.cuh"
#include "gate_hc.cuh"
#include "attention.cuh"
#include "index.cuh"
#include "compressor_engram.cuh"
#include "generic.cuh"
#include "fused.cuh"
#include "gemm_tc.cuh"
#include "gemm_bf16.cuh"
#include "gemv_mma.cuh"
