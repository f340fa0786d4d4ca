// Host emulation of the CUDA builtins the gemv.cuh kernels use, to run them
// on the CPU against a reference where there is no GPU: one std::thread per
// CUDA thread of a block (blocks one after another), __syncthreads a
// std::barrier (a thread that returns drops out of it, as an exited CUDA
// thread does), static __shared__ arrays and the dynamic shared memory one copy. x86 keeps
// subnormals and g++ -ffp-contract=off keeps a*b+c two roundings, as the
// build's -fmad=false does, so the bits are the device's. See gemv_emu.cpp.
#pragma once
#include <cstring>
#include <cmath>
#include <cstdint>
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>
#include <functional>
#define __host__
#define __device__
#define __global__
#define __shared__ static // one copy for all the emulated threads
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
struct uint3 { unsigned x, y, z; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
struct dim3 { unsigned x, y, z; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline thread_local uint3 threadIdx;
inline uint3 blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* g_bar;
// one barrier per warp of the block, for the warp-collective emulations
// (gmma_emu.cpp's mma.sync)
inline std::vector<std::barrier<>*> g_warp_bars;
inline void __syncwarp() { g_warp_bars[threadIdx.x / 32]->arrive_and_wait(); }
inline void __syncthreads() { g_bar->arrive_and_wait(); }
inline std::atomic<int> emu_fail{0};
inline int __syncthreads_and(int p) {
    __syncthreads();
    if (!p) emu_fail = 1;
    __syncthreads();
    const int r = !emu_fail;
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) emu_fail = 0;
    return r;
}
inline int __syncthreads_or(int p) { return !__syncthreads_and(!p); }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }
inline float __ldcg(const float* p) { float v; __atomic_load(p, &v, __ATOMIC_SEQ_CST); return v; }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicMax(int* p, int v) {
    int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return old;
}
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
using std::min; using std::max; using std::signbit; using std::isinf; using std::fabs; inline float fabsf(float x) { return std::fabs(x); }
inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
// warp shuffles: each lane posts its value in its warp's exchange slots,
// the warp meets at its barrier, reads the source lane's slot, and meets
// again before the slots are reused. Every lane of the warp must take part
// (the kernels pass FULL_MASK); blocks are 1-D (lane = threadIdx.x % 32).
inline uint64_t emu_shfl_slot[32][32];
template <class T> inline T emu_shfl(T v, int src) {
    static_assert(sizeof(T) <= 8, "emu_shfl: value wider than 8 bytes");
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    uint64_t b = 0;
    memcpy(&b, &v, sizeof(T));
    emu_shfl_slot[w][l] = b;
    __syncwarp();
    b = emu_shfl_slot[w][src & 31];
    __syncwarp();
    T r;
    memcpy(&r, &b, sizeof(T));
    return r;
}
template <class T> inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
    const int l = threadIdx.x % 32;
    return emu_shfl(v, (l / width) * width + ((src % width) + width) % width);
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    const int l = threadIdx.x % 32, s = l ^ mask;
    return emu_shfl(v, s / width == l / width ? s : l);
}
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    const int l = threadIdx.x % 32;
    return emu_shfl(v, (l % width) + (int)delta < width ? l + (int)delta : l);
}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    const int l = threadIdx.x % 32;
    return emu_shfl(v, (l % width) >= (int)delta ? l - (int)delta : l);
}
// the kernels' dynamic shared memory
alignas(16) inline float emu_dyn_shared[1 << 16];
#define GEMV_DYN_SHARED(T, name) T* name = (T*)emu_dyn_shared
// launch runs kernel over grid × block threads
inline void launch(dim3 grid, dim3 block, std::function<void()> k) {
    gridDim = grid; blockDim = block;
    int nt = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; bz++) for (unsigned by = 0; by < grid.y; by++) for (unsigned bx = 0; bx < grid.x; bx++) {
        blockIdx = {bx, by, bz};
        std::barrier<> bar(nt);
        g_bar = &bar;
        std::vector<std::barrier<>*> wbars;
        for (int w = 0; w < (nt + 31) / 32; w++) wbars.push_back(new std::barrier<>(std::min(32, nt - 32 * w)));
        g_warp_bars = wbars;
        std::vector<std::thread> ts;
        for (int t = 0; t < nt; t++) ts.emplace_back([&, t] {
            threadIdx = {(unsigned)(t % block.x), (unsigned)((t / block.x) % block.y), (unsigned)(t / (block.x * block.y))};
            k();
            g_bar->arrive_and_drop();
            g_warp_bars[t / 32]->arrive_and_drop();
            // threads that returned early still count at later barriers
        });
        for (auto& th : ts) th.join();
        for (auto* b : wbars) delete b;
    }
}
