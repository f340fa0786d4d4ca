// A small stand-in for the CUDA headers, for a syntax check only: clang-14 in
// CUDA device mode (-nocudainc -nocudalib) parses ds4.cu against these
// declarations (syntax.sh). Nothing here is compiled into the fatbin; nvcc
// builds it against the real headers. Add a declaration when a kernel uses a
// builtin that is not here yet (with the CUDA signature).
#pragma once

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

typedef __SIZE_TYPE__ size_t;
typedef unsigned long long uint64_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;

// Vector types (the members and alignment of CUDA's vector_types.h).
struct __align__(8) uint2 { unsigned x, y; };
struct uint3 { unsigned x, y, z; };
struct __align__(16) uint4 { unsigned x, y, z, w; };
struct __align__(8) int2 { int x, y; };
struct __align__(16) int4 { int x, y, z, w; };
struct __align__(8) float2 { float x, y; };
struct __align__(16) float4 { float x, y, z, w; };
struct __align__(16) ulonglong2 { unsigned long long x, y; };
struct dim3 { unsigned x, y, z; };
__device__ __forceinline__ uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
__device__ __forceinline__ uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
__device__ __forceinline__ float2 make_float2(float x, float y) { return float2{x, y}; }
__device__ __forceinline__ float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

// Built-in variables.
extern const __device__ uint3 threadIdx;
extern const __device__ uint3 blockIdx;
extern const __device__ dim3 blockDim;
extern const __device__ dim3 gridDim;
extern const __device__ int warpSize;

// Synchronisation and warp primitives.
__device__ void __syncthreads();
__device__ int __syncthreads_count(int);
__device__ int __syncthreads_and(int);
__device__ int __syncthreads_or(int);
__device__ void __syncwarp(unsigned mask = 0xffffffffu);
__device__ void __threadfence();
__device__ void __threadfence_block();
__device__ unsigned __ballot_sync(unsigned, int);
__device__ int __any_sync(unsigned, int);
__device__ int __all_sync(unsigned, int);
__device__ unsigned __activemask();
#define DS4_SHIM_SHFL(T)                                                  \
    __device__ T __shfl_sync(unsigned, T, int, int w = 32);               \
    __device__ T __shfl_xor_sync(unsigned, T, int, int w = 32);           \
    __device__ T __shfl_down_sync(unsigned, T, unsigned, int w = 32);     \
    __device__ T __shfl_up_sync(unsigned, T, unsigned, int w = 32);
DS4_SHIM_SHFL(int)
DS4_SHIM_SHFL(unsigned)
DS4_SHIM_SHFL(long long)
DS4_SHIM_SHFL(unsigned long long)
DS4_SHIM_SHFL(float)
DS4_SHIM_SHFL(double)
#undef DS4_SHIM_SHFL

// Atomics.
#define DS4_SHIM_ATOMIC(T)                                                \
    __device__ T atomicAdd(T*, T);                                        \
    __device__ T atomicMax(T*, T);                                        \
    __device__ T atomicMin(T*, T);                                        \
    __device__ T atomicExch(T*, T);                                       \
    __device__ T atomicCAS(T*, T, T);                                     \
    __device__ T atomicOr(T*, T);                                         \
    __device__ T atomicAnd(T*, T);
DS4_SHIM_ATOMIC(int)
DS4_SHIM_ATOMIC(unsigned)
DS4_SHIM_ATOMIC(unsigned long long)
#undef DS4_SHIM_ATOMIC
__device__ float atomicAdd(float*, float);
__device__ double atomicAdd(double*, double);

// Read-only cached loads.
#define DS4_SHIM_LDG(T) __device__ T __ldg(const T*);
DS4_SHIM_LDG(char)
DS4_SHIM_LDG(signed char)
DS4_SHIM_LDG(unsigned char)
DS4_SHIM_LDG(short)
DS4_SHIM_LDG(unsigned short)
DS4_SHIM_LDG(int)
DS4_SHIM_LDG(unsigned)
DS4_SHIM_LDG(long long)
DS4_SHIM_LDG(unsigned long long)
DS4_SHIM_LDG(float)
DS4_SHIM_LDG(double)
DS4_SHIM_LDG(uint2)
DS4_SHIM_LDG(uint4)
DS4_SHIM_LDG(int2)
DS4_SHIM_LDG(int4)
DS4_SHIM_LDG(float2)
DS4_SHIM_LDG(float4)
#undef DS4_SHIM_LDG
__device__ float __ldcg(const float*); // L2 loads (cache global)

// Bit reinterpretation, integer intrinsics and rounded arithmetic.
__device__ float __uint_as_float(unsigned);
__device__ unsigned __float_as_uint(float);
__device__ float __int_as_float(int);
__device__ int __float_as_int(float);
__device__ double __longlong_as_double(long long);
__device__ long long __double_as_longlong(double);
__device__ int __popc(unsigned);
__device__ int __popcll(unsigned long long);
__device__ int __clz(int);
__device__ int __clzll(long long);
__device__ int __ffs(int);
__device__ unsigned __brev(unsigned);
__device__ unsigned __byte_perm(unsigned, unsigned, unsigned);
__device__ unsigned __funnelshift_r(unsigned, unsigned, unsigned);
__device__ unsigned __funnelshift_l(unsigned, unsigned, unsigned);
__device__ float __fsqrt_rn(float);
__device__ float __fdiv_rn(float, float);
__device__ float __fadd_rn(float, float);
__device__ float __fmul_rn(float, float);
__device__ float __fmaf_rn(float, float, float);
__device__ double __dadd_rn(double, double);
__device__ double __dmul_rn(double, double);

// Math (float and double overloads, as CUDA's math headers give them).
#define DS4_SHIM_MATH1(fn)                                                \
    __device__ float fn(float);                                           \
    __device__ double fn(double);                                         \
    __device__ float fn##f(float);
DS4_SHIM_MATH1(exp)
DS4_SHIM_MATH1(exp2)
DS4_SHIM_MATH1(log)
DS4_SHIM_MATH1(log2)
DS4_SHIM_MATH1(log1p)
DS4_SHIM_MATH1(sqrt)
DS4_SHIM_MATH1(rsqrt)
DS4_SHIM_MATH1(ceil)
DS4_SHIM_MATH1(floor)
DS4_SHIM_MATH1(rint)
DS4_SHIM_MATH1(round)
DS4_SHIM_MATH1(trunc)
DS4_SHIM_MATH1(fabs)
DS4_SHIM_MATH1(sin)
DS4_SHIM_MATH1(cos)
DS4_SHIM_MATH1(tanh)
#undef DS4_SHIM_MATH1
__device__ float ldexpf(float, int);
__device__ double ldexp(double, int);
__device__ float frexpf(float, int*);
__device__ double frexp(double, int*);
__device__ float copysignf(float, float);
__device__ double copysign(double, double);
__device__ float fmaxf(float, float);
__device__ float fminf(float, float);
__device__ float fmaf(float, float, float);
__device__ double fma(double, double, double);
__device__ bool signbit(float);
__device__ bool signbit(double);
__device__ bool isinf(float);
__device__ bool isinf(double);
__device__ bool isnan(float);
__device__ bool isnan(double);
__device__ bool isfinite(float);
__device__ bool isfinite(double);
__device__ int min(int, int);
__device__ int max(int, int);
__device__ unsigned min(unsigned, unsigned);
__device__ unsigned max(unsigned, unsigned);
__device__ long long min(long long, long long);
__device__ long long max(long long, long long);
__device__ float min(float, float);
__device__ float max(float, float);
