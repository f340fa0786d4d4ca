// Package cuda is the NVIDIA GPU backend, registered as "cuda": every op of
// the released architecture's prefill and decode graphs runs on GPU 0.
//
//   - driver/ binds the CUDA driver API (libcuda.so.1) at run time with
//     purego, without cgo: CGO_ENABLED=0 builds keep working and a binary
//     starts on a machine without a GPU; driver.Probe gives the reason the
//     GPU cannot be used ("libcuda.so.1 not found", "no CUDA device",
//     "driver too old: …"), which Backend.Available returns. Every call's
//     result is checked and reported with the buffer or op it served.
//   - kernels/ holds the CUDA C sources (one translation unit, ds4.cu) and
//     build.sh, the exact nvcc command: sm_90a machine code plus compute_90
//     PTX. The built ds4.fatbin and ds4.fatbin.sha256 are checked in and
//     embedded; a test fails when the sources and the embedded fatbin drift
//     apart. Kernels (kernels.go, generic.go) enqueues one launch per method.
//   - The backend (backend.go, device.go, program.go, ops.go, weights.go)
//     implements backends.Device. BindWeight chooses each weight's layout:
//     bf16 matrices stay bf16 and the fp8 wo_a stays fp8 (the products read
//     them as stored), fp8/fp4 products, expert stacks (one buffer per stack,
//     so the routed kernels index experts by the ids the gate left on the
//     GPU) and the Engram tables keep codes and e8m0 scales, other floats
//     become fp32 values. State, caches, the RoPE tables and the activation
//     arena (one buffer per plan slot) are device buffers. A segment's
//     Program queues one launcher per node (ops.go) on the GPU's stream; the
//     host computes only what follows from the call's start position
//     (positions, window indices, visible lengths) and uploads it, so nothing
//     is read back between the ops of a step: the outputs (logits), a probe
//     a trace asks for, and the error flags of embed and token_map (a token
//     id out of range) at Sync.
//   - Engram tables go to the GPU when they fit in its free memory, else
//     they stay in page-locked host memory mapped for the GPU
//     (driver.HostBuffer; DS4_CUDA_ENGRAM=host or gpu forces either): their
//     row ids are computed by the hash kernel on the GPU, and the lookup
//     kernel reads the chosen rows through the mapping, so only those rows
//     cross PCIe and nothing goes back to the host inside the step. On the
//     GPU a table costs its fp8 bytes (one a value, a scale per 32); the
//     released config's two tables (~2 × 98 GB) exceed one H200 and stay on
//     the host.
//   - Memory: the arena's slots are totalled and checked against the free
//     memory before any is allocated, as is each weight and state buffer;
//     a refusal is one line naming the need and the free memory. Close frees
//     every allocation the device made (GPU 0's primary context stays
//     retained for the process).
//
// Each kernel mirrors a reference kernel of backends/cpu/kernels or
// internal/numfmt with the same rounding points (fp32 activations holding
// bf16 values, products and sums in the reference's order where the order
// decides the rounding, -fmad=false), so a whole model run reproduces the
// cpu-ref backend bit for bit; NOTES.md records what was measured on the
// H200. Speed is the next step: the layouts (device-resident buffers, the K
// tiling by scale blocks, ids on the device) are the ones a tensor-core
// version keeps.
package cuda
