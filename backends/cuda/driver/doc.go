// Package driver is the part of the CUDA driver API (libcuda.so.1) that the
// CUDA backend uses, loaded at run time with purego: no cgo, so a binary that
// links it builds with CGO_ENABLED=0 and starts on a machine without a GPU;
// Probe then says why the GPU cannot be used.
//
// Every call's result is checked and returned as an *Error that names the
// call and what it served (`cuMemAlloc of 1.5 GiB for "layers.3.ffn.experts":
// CUDA_ERROR_OUT_OF_MEMORY (out of memory)`). Memory is plain device memory
// (cuMemAlloc), never managed memory.
//
// A CUDA context is current per OS thread while goroutines move between
// threads, so every method that needs the context locks the goroutine to its
// thread and makes the context current for the duration of the call
// (Context.bind); the cost is one cuCtxSetCurrent, well under a microsecond.
package driver
