// Package cuda is the groundwork of the NVIDIA GPU backend (issue 12): the
// driver binding, the kernels and their launchers. It is not registered as a
// backend yet (the device-shaped backend contract comes first), so
// `-backend cuda` still reports that the backend is unavailable.
//
//   - driver/ binds the CUDA driver API (libcuda.so.1) at run time with
//     purego, without cgo: CGO_ENABLED=0 builds keep working and a binary
//     starts on a machine without a GPU; driver.Probe gives the reason the
//     GPU cannot be used ("libcuda.so.1 not found", "no CUDA device",
//     "driver too old: …"). Every call's result is checked and reported
//     with the buffer or op it served.
//   - kernels/ holds the CUDA C sources (one translation unit, ds4.cu) and
//     build.sh, the exact nvcc command: sm_90a machine code plus compute_90
//     PTX, so Hopper runs the machine code and newer GPUs JIT the PTX. The
//     built ds4.fatbin and ds4.fatbin.sha256 (the SHA-256 of each source
//     and of the fatbin) are checked in and embedded; a test fails when the
//     sources and the embedded fatbin drift apart.
//   - Kernels (kernels.go) loads the fatbin into a context and enqueues one
//     launch per method on a stream. Data stays on the device between
//     launches (expert ids from the gate feed the routed products directly);
//     nothing waits until a Download. generic.go has the graph's unfused ops
//     (elementwise with broadcasting, reductions, softmax, top-k, gathers)
//     and one strided copy for the data movement ops (slice, concat,
//     expand, cache and window writes).
//
// Each kernel mirrors a reference kernel of backends/cpu/kernels or
// internal/numfmt with the same rounding points: fp32 activations holding
// bf16 values, products and sums in the reference's order where the order
// decides the rounding (RMSNorm replays torch's CPU summation order,
// matmul_fp8/fp4 sum each 32-wide K block in K order, the top-k selections
// rank with the reference's tie rule), float64 where the
// reference uses float64, -fmad=false so that no product is fused into an
// addition. The tests (kernels_test.go, GPU only) compare every element with
// the reference on fresh random inputs; NOTES.md records what they measured
// on the H200. Speed comes next: the layouts (device-resident buffers, the
// K tiling by scale blocks, ids on the device) are the ones a tensor-core
// version keeps.
package cuda
