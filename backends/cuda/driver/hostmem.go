package driver

import (
	"fmt"
	"syscall"
	"unsafe"
)

// HostBuffer is page-locked host memory mapped into the GPU's address
// space: kernels read it over PCIe through Dev, and only the bytes they
// read cross (for tables too large for the GPU, read a few rows a step).
type HostBuffer struct {
	Bytes []byte // the host view (anonymous memory, not Go's heap)
	Dev   Ptr    // the device address of Bytes[0]
	c     *Context
	what  string
}

// cuMemHostRegister flags: portable (every context), device-mapped.
const hostRegisterFlags = 0x01 | 0x02

// NewHostBuffer maps n bytes of anonymous memory, registers them with the
// driver and returns their device address; what names it in errors.
func (c *Context) NewHostBuffer(n int, what string) (*HostBuffer, error) {
	if cu.memHostRegister == nil || cu.memHostUnreg == nil || cu.memHostDevPtr == nil {
		return nil, fmt.Errorf("host memory for %q: %s lacks cuMemHostRegister_v2 or cuMemHostGetDevicePointer_v2", what, LibName)
	}
	b, err := syscall.Mmap(-1, 0, max(n, 1), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("mapping %s of host memory for %q: %v", Size(uint64(n)), what, err)
	}
	h := &HostBuffer{Bytes: b[:n], c: c, what: what}
	p := unsafe.Pointer(&b[0])
	err = c.do(func() error {
		if err := check(cu.memHostRegister(p, uint64(len(b)), hostRegisterFlags), "cuMemHostRegister", fmt.Sprintf("of %s for %q", Size(uint64(len(b))), what)); err != nil {
			return err
		}
		var d uint64
		if err := check(cu.memHostDevPtr(&d, p, 0), "cuMemHostGetDevicePointer", fmt.Sprintf("of %q", what)); err != nil {
			cu.memHostUnreg(p)
			return err
		}
		h.Dev = Ptr(d)
		return nil
	})
	if err != nil {
		syscall.Munmap(b)
		return nil, err
	}
	return h, nil
}

// Free unregisters and unmaps the buffer (the GPU must no longer read it).
func (h *HostBuffer) Free() error {
	if h.Bytes == nil {
		return nil
	}
	b := h.Bytes[:cap(h.Bytes)]
	err := h.c.do(func() error {
		return check(cu.memHostUnreg(unsafe.Pointer(&b[0])), "cuMemHostUnregister", fmt.Sprintf("of %q", h.what))
	})
	if e := syscall.Munmap(b); e != nil && err == nil {
		err = e
	}
	h.Bytes = nil
	return err
}
