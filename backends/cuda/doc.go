// Package cuda will hold the NVIDIA GPU backend: the CUDA driver, cuBLASLt
// and NVRTC loaded at run time with purego (no cgo), precompiled sm_90a
// kernels embedded in the binary, and the CPU backend running what it does
// not support. It is not implemented yet: asking for it reports that the
// backend is unavailable (see RATIONALE.md).
package cuda
