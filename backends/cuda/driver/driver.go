package driver

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LibName is the driver library loaded by Load.
const LibName = "libcuda.so.1"

// MinDriverVersion is the oldest driver API version (cuDriverGetVersion,
// 1000·major + 10·minor) that loads the embedded kernels: they are built with
// CUDA 13.0, and a CUDA 13 fatbin needs a CUDA 13 driver.
const MinDriverVersion = 13000

// MinComputeCapability is the oldest GPU generation the kernels run on
// (sm_90a machine code for Hopper, compute_90 PTX for newer GPUs to JIT).
const MinComputeCapability = 90

// Result is a CUresult.
type Result int32

// Results the package tells apart.
const (
	Success              Result = 0
	ErrOutOfMemory       Result = 2
	ErrInsufficientDrv   Result = 35
	ErrNoDevice          Result = 100
	ErrInvalidDevice     Result = 101
	ErrNoBinaryForGPU    Result = 209
	ErrUnsupportedPTXVer Result = 222
)

// Error is a failed driver call.
type Error struct {
	Call string // the driver function, e.g. "cuMemAlloc"
	What string // what the call served, e.g. `of 1.5 GiB for "layers.3.ffn.experts"`
	Code Result
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string // the driver's description, e.g. "out of memory"
}

func (e *Error) Error() string {
	s := e.Call
	if e.What != "" {
		s += " " + e.What
	}
	return fmt.Sprintf("%s: %s (%s)", s, e.Name, e.Desc)
}

// the bound driver functions (CUcontext, CUstream, … are opaque pointers,
// kept as uintptr; CUdeviceptr is a 64-bit integer)
var cu struct {
	init             func(flags uint32) Result
	driverGetVersion func(v *int32) Result
	deviceGetCount   func(n *int32) Result
	deviceGet        func(d *int32, ordinal int32) Result
	deviceGetName    func(name *byte, n int32, d int32) Result
	deviceGetAttr    func(v *int32, attr int32, d int32) Result
	deviceTotalMem   func(bytes *uint64, d int32) Result
	primaryRetain    func(ctx *uintptr, d int32) Result
	primaryRelease   func(d int32) Result
	ctxSetCurrent    func(ctx uintptr) Result
	memAlloc         func(p *uint64, bytes uint64) Result
	memFree          func(p uint64) Result
	memGetInfo       func(free, total *uint64) Result
	memcpyHtoDAsync  func(dst uint64, src unsafe.Pointer, bytes uint64, s uintptr) Result
	memcpyDtoHAsync  func(dst unsafe.Pointer, src uint64, bytes uint64, s uintptr) Result
	memcpyDtoDAsync  func(dst, src uint64, bytes uint64, s uintptr) Result
	memsetD8Async    func(dst uint64, v uint8, n uint64, s uintptr) Result
	streamCreate     func(s *uintptr, flags uint32) Result
	streamSync       func(s uintptr) Result
	streamDestroy    func(s uintptr) Result
	eventCreate      func(e *uintptr, flags uint32) Result
	eventRecord      func(e uintptr, s uintptr) Result
	eventSync        func(e uintptr) Result
	eventElapsed     func(ms *float32, start, end uintptr) Result
	eventDestroy     func(e uintptr) Result
	moduleLoadData   func(m *uintptr, image unsafe.Pointer) Result
	moduleUnload     func(m uintptr) Result
	moduleGetFunc    func(f *uintptr, m uintptr, name string) Result
	launchKernel     func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, s uintptr, params *unsafe.Pointer, extra uintptr) Result
	launchKernelEx   func(cfg *launchConfig, f uintptr, params *unsafe.Pointer, extra uintptr) Result // optional
	memHostRegister  func(p unsafe.Pointer, bytes uint64, flags uint32) Result
	memHostUnreg     func(p unsafe.Pointer) Result
	memHostDevPtr    func(d *uint64, p unsafe.Pointer, flags uint32) Result
	getErrorName     func(r Result, s **byte) Result

	// graphs (optional)
	beginCapture        func(s uintptr, mode uint32) Result
	endCapture          func(s uintptr, g *uintptr) Result
	graphInstantiate    func(e *uintptr, g uintptr, flags uint64) Result
	graphLaunch         func(e uintptr, s uintptr) Result
	graphExecDestroy    func(e uintptr) Result
	graphDestroy        func(g uintptr) Result
	graphGetRootNodes   func(g uintptr, nodes *uintptr, n *uint64) Result
	nodeGetDependents   func(node uintptr, nodes *uintptr, n *uint64) Result
	nodeGetDependentsV2 func(node uintptr, nodes *uintptr, edges *graphEdge, n *uint64) Result
	execKernelSetParams func(e, node uintptr, p unsafe.Pointer) Result
	execMemsetSetParams func(e, node uintptr, p unsafe.Pointer, ctx uintptr) Result
	execMemcpySetParams func(e, node uintptr, p unsafe.Pointer, ctx uintptr) Result
	getErrorString      func(r Result, s **byte) Result
}

// symbols maps each bound function to its exported name (the _v2 names are
// what cuda.h's macros select).
func symbols() []struct {
	fptr any
	name string
} {
	return []struct {
		fptr any
		name string
	}{
		{&cu.init, "cuInit"}, {&cu.driverGetVersion, "cuDriverGetVersion"},
		{&cu.deviceGetCount, "cuDeviceGetCount"}, {&cu.deviceGet, "cuDeviceGet"},
		{&cu.deviceGetName, "cuDeviceGetName"}, {&cu.deviceGetAttr, "cuDeviceGetAttribute"},
		{&cu.deviceTotalMem, "cuDeviceTotalMem_v2"},
		{&cu.primaryRetain, "cuDevicePrimaryCtxRetain"}, {&cu.primaryRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&cu.ctxSetCurrent, "cuCtxSetCurrent"},
		{&cu.memAlloc, "cuMemAlloc_v2"}, {&cu.memFree, "cuMemFree_v2"}, {&cu.memGetInfo, "cuMemGetInfo_v2"},
		{&cu.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&cu.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&cu.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"}, {&cu.memsetD8Async, "cuMemsetD8Async"},
		{&cu.streamCreate, "cuStreamCreate"}, {&cu.streamSync, "cuStreamSynchronize"},
		{&cu.streamDestroy, "cuStreamDestroy_v2"},
		{&cu.eventCreate, "cuEventCreate"}, {&cu.eventRecord, "cuEventRecord"},
		{&cu.eventSync, "cuEventSynchronize"}, {&cu.eventElapsed, "cuEventElapsedTime"},
		{&cu.eventDestroy, "cuEventDestroy_v2"},
		{&cu.moduleLoadData, "cuModuleLoadData"}, {&cu.moduleUnload, "cuModuleUnload"},
		{&cu.moduleGetFunc, "cuModuleGetFunction"}, {&cu.launchKernel, "cuLaunchKernel"},
		{&cu.getErrorName, "cuGetErrorName"}, {&cu.getErrorString, "cuGetErrorString"},
	}
}

// optionalSymbols are bound when present; without them NewHostBuffer
// reports that the driver lacks them, and calls run without graphs
// (GraphsSupported). cuGraphExecKernelNodeSetParams_v2 falls back to the
// first version (the same leading fields) in loadOnce.
func optionalSymbols() []struct {
	fptr any
	name string
} {
	return []struct {
		fptr any
		name string
	}{
		{&cu.launchKernelEx, "cuLaunchKernelEx"},
		{&cu.memHostRegister, "cuMemHostRegister_v2"}, {&cu.memHostUnreg, "cuMemHostUnregister"},
		{&cu.memHostDevPtr, "cuMemHostGetDevicePointer_v2"},
		{&cu.beginCapture, "cuStreamBeginCapture_v2"}, {&cu.endCapture, "cuStreamEndCapture"},
		{&cu.graphInstantiate, "cuGraphInstantiateWithFlags"}, {&cu.graphLaunch, "cuGraphLaunch"},
		{&cu.graphExecDestroy, "cuGraphExecDestroy"}, {&cu.graphDestroy, "cuGraphDestroy"},
		{&cu.graphGetRootNodes, "cuGraphGetRootNodes"},
		{&cu.nodeGetDependentsV2, "cuGraphNodeGetDependentNodes_v2"}, {&cu.nodeGetDependents, "cuGraphNodeGetDependentNodes"},
		{&cu.execKernelSetParams, "cuGraphExecKernelNodeSetParams_v2"},
		{&cu.execMemsetSetParams, "cuGraphExecMemsetNodeSetParams"}, {&cu.execMemcpySetParams, "cuGraphExecMemcpyNodeSetParams"},
	}
}

var load struct {
	once sync.Once
	err  error
}

// Load opens libcuda.so.1, binds the functions and calls cuInit, once per
// process; later calls return the first call's result. The error is a short
// reason fit for `exec -list-backends` ("libcuda.so.1 not found", "no CUDA
// device", "driver too old: …").
func Load() error {
	load.once.Do(func() { load.err = loadOnce() })
	return load.err
}

func loadOnce() error {
	// dlerror's message is per thread: keep Dlopen and its dlerror on one
	// (without this the reason came back empty about one run in 16).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(LibName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		if strings.Contains(err.Error(), "No such file") || strings.Contains(err.Error(), "cannot open") {
			return errors.New(LibName + " not found")
		}
		return fmt.Errorf("%s could not be loaded: %v", LibName, err)
	}
	for _, s := range symbols() {
		if _, err := purego.Dlsym(h, s.name); err != nil {
			return fmt.Errorf("driver too old: %s has no %s", LibName, s.name)
		}
		purego.RegisterLibFunc(s.fptr, h, s.name)
	}
	for _, s := range optionalSymbols() { // host-mapped memory (tables kept on the host), graphs
		if _, err := purego.Dlsym(h, s.name); err == nil {
			purego.RegisterLibFunc(s.fptr, h, s.name)
		}
	}
	if cu.execKernelSetParams == nil {
		if _, err := purego.Dlsym(h, "cuGraphExecKernelNodeSetParams"); err == nil {
			purego.RegisterLibFunc(&cu.execKernelSetParams, h, "cuGraphExecKernelNodeSetParams")
		}
	}
	if r := cu.init(0); r != Success {
		switch r {
		case ErrNoDevice, ErrInvalidDevice:
			return errors.New("no CUDA device")
		case ErrInsufficientDrv:
			return errors.New("driver too old: " + check(r, "cuInit", "").Error())
		}
		return check(r, "cuInit", "")
	}
	return nil
}

// check turns a result into nil or an *Error.
func check(r Result, call, what string) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, What: what, Code: r, Name: fmt.Sprintf("CUDA error %d", int(r)), Desc: "unknown"}
	if cu.getErrorName != nil {
		var p *byte
		if cu.getErrorName(r, &p) == Success {
			e.Name = cString(p)
		}
		if cu.getErrorString(r, &p) == Success {
			e.Desc = cString(p)
		}
	}
	return e
}

// cString copies a NUL-terminated C string owned by the driver.
func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := p; *q != 0; q = (*byte)(unsafe.Add(unsafe.Pointer(q), 1)) {
		b = append(b, *q)
	}
	return string(b)
}

// Size formats a byte count the way error messages give it (1.5 GiB, 512 B).
func Size(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	s := fmt.Sprintf("%.1f", v)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

// DriverVersion returns cuDriverGetVersion's value (e.g. 13000 for 13.0).
func DriverVersion() (int, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var v int32
	if err := check(cu.driverGetVersion(&v), "cuDriverGetVersion", ""); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Device describes one GPU.
type Device struct {
	Ordinal  int
	Name     string
	CC       int    // compute capability, 10·major + minor (90 for Hopper)
	SMs      int    // multiprocessors
	TotalMem uint64 // bytes
}

// Device attributes read by Devices (CUdevice_attribute values).
const (
	attrSMCount = 16
	attrCCMajor = 75
	attrCCMinor = 76
)

// Devices lists the GPUs the driver sees.
func Devices() ([]Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n int32
	if err := check(cu.deviceGetCount(&n), "cuDeviceGetCount", ""); err != nil {
		return nil, err
	}
	out := make([]Device, 0, n)
	for i := range n {
		d, err := describe(i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func describe(ordinal int32) (Device, error) {
	what := fmt.Sprintf("of GPU %d", ordinal)
	var dev int32
	if err := check(cu.deviceGet(&dev, ordinal), "cuDeviceGet", what); err != nil {
		return Device{}, err
	}
	name := make([]byte, 256)
	if err := check(cu.deviceGetName(&name[0], int32(len(name)), dev), "cuDeviceGetName", what); err != nil {
		return Device{}, err
	}
	attr := func(a int32) (int, error) {
		var v int32
		err := check(cu.deviceGetAttr(&v, a, dev), "cuDeviceGetAttribute", fmt.Sprintf("%d %s", a, what))
		return int(v), err
	}
	major, err := attr(attrCCMajor)
	if err != nil {
		return Device{}, err
	}
	minor, err := attr(attrCCMinor)
	if err != nil {
		return Device{}, err
	}
	sms, err := attr(attrSMCount)
	if err != nil {
		return Device{}, err
	}
	var total uint64
	if err := check(cu.deviceTotalMem(&total, dev), "cuDeviceTotalMem", what); err != nil {
		return Device{}, err
	}
	return Device{Ordinal: int(ordinal), Name: cString(&name[0]), CC: 10*major + minor, SMs: sms, TotalMem: total}, nil
}

// Probe reports why the CUDA backend cannot run here, or nil when GPU 0 can
// run the embedded kernels: the library, a device, the driver's version and
// the GPU's compute capability are checked.
func Probe() error {
	v, err := DriverVersion()
	if err != nil {
		return err
	}
	if v < MinDriverVersion {
		return fmt.Errorf("driver too old: CUDA %d.%d, need %d.%d", v/1000, v%1000/10, MinDriverVersion/1000, MinDriverVersion%1000/10)
	}
	devs, err := Devices()
	if err != nil {
		return err
	}
	if len(devs) == 0 {
		return errors.New("no CUDA device")
	}
	if d := devs[0]; d.CC < MinComputeCapability {
		return fmt.Errorf("GPU 0 (%s) has compute capability %d.%d; the kernels need %d.%d or newer",
			d.Name, d.CC/10, d.CC%10, MinComputeCapability/10, MinComputeCapability%10)
	}
	return nil
}

// Context is a retained primary context of one GPU.
type Context struct {
	dev int32
	h   uintptr
}

// Open retains the primary context of GPU ordinal.
func Open(ordinal int) (*Context, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("of GPU %d", ordinal)
	var dev int32
	if err := check(cu.deviceGet(&dev, int32(ordinal)), "cuDeviceGet", what); err != nil {
		return nil, err
	}
	c := &Context{dev: dev}
	if err := check(cu.primaryRetain(&c.h, dev), "cuDevicePrimaryCtxRetain", what); err != nil {
		return nil, err
	}
	return c, nil
}

// Close releases the primary context (the driver destroys it, and every
// allocation in it, when the last retain is released).
func (c *Context) Close() error {
	return check(cu.primaryRelease(c.dev), "cuDevicePrimaryCtxRelease", fmt.Sprintf("of GPU %d", c.dev))
}

// bind locks the calling goroutine to its thread and makes c current there;
// the returned function unlocks it.
func (c *Context) bind() (func(), error) {
	runtime.LockOSThread()
	if r := cu.ctxSetCurrent(c.h); r != Success { // (formatted only on failure: bound for every launch)
		err := check(r, "cuCtxSetCurrent", fmt.Sprintf("of GPU %d", c.dev))
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// do runs f with c current.
func (c *Context) do(f func() error) error {
	unbind, err := c.bind()
	if err != nil {
		return err
	}
	defer unbind()
	return f()
}

// Ptr is a device address (CUdeviceptr).
type Ptr uint64

// Alloc allocates bytes of device memory for what (a tensor or buffer name,
// quoted in errors).
func (c *Context) Alloc(bytes int, what string) (Ptr, error) {
	var p uint64
	err := c.do(func() error {
		return check(cu.memAlloc(&p, uint64(bytes)), "cuMemAlloc", fmt.Sprintf("of %s for %q", Size(uint64(bytes)), what))
	})
	return Ptr(p), err
}

// Free frees an allocation of Alloc.
func (c *Context) Free(p Ptr, what string) error {
	return c.do(func() error { return check(cu.memFree(uint64(p)), "cuMemFree", fmt.Sprintf("of %q", what)) })
}

// MemInfo returns the free and total device memory in bytes.
func (c *Context) MemInfo() (free, total uint64, err error) {
	err = c.do(func() error { return check(cu.memGetInfo(&free, &total), "cuMemGetInfo", "") })
	return free, total, err
}

// Stream is a CUDA stream of a context.
type Stream struct {
	c         *Context
	h         uintptr
	tape      *Tape // recording (BeginTape) instead of running
	capturing bool
	count     Counters
	ptrs      []unsafe.Pointer // Launch's parameter pointers, reused
	rejected  error            // the node update the driver last refused (update; RunTape moves it to Graphs.Rejected)
	pdl       *pdlLaunch       // programmatic launches on (SetProgrammaticLaunch), else nil
	bound     bool             // inside Bound: the thread is locked with c current
	page      *launchPage      // the launches' parameters outside the Go heap (nil: Go slices, pinned a launch)
	pageMem   []byte           // page's mapping
}

// launchPage is a stream's launch parameters outside the Go heap (one
// anonymous mapping): Launch copies a launch's arguments into args and
// passes ptrs, whose entries point at them, and the programmatic launches'
// config and attribute live here too, so a launch allocates and pins
// nothing (the pinning was ~6 % of the host's time a decode step on the
// simulated driver).
type launchPage struct {
	args [maxPageArgs]Arg
	ptrs [maxPageArgs + 1]unsafe.Pointer
	cfg  launchConfig
	attr launchAttr
}

// maxPageArgs is the most parameters a launch passes through the page
// (more take the pinned Go slices).
const maxPageArgs = 64

// newLaunchPage maps a stream's launch page; nil where the mapping fails
// (the stream then pins its Go slices each launch).
func newLaunchPage() (*launchPage, []byte) {
	mem, err := syscall.Mmap(-1, 0, int(unsafe.Sizeof(launchPage{})), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil
	}
	lp := (*launchPage)(unsafe.Pointer(&mem[0]))
	for i := range lp.args {
		lp.ptrs[i] = unsafe.Pointer(&lp.args[i])
	}
	return lp, mem
}

// Bound runs f with the stream's context current on one locked OS thread
// for all of it, so the kernel launches f makes on s skip making it
// current each time (cuCtxSetCurrent: ~1.3 µs of a ~5.7 µs launch on the
// H200's host, where a decode step's launches bound it about as much as
// its kernels do). f must not make another context current (this process
// opens only device 0's primary context) nor use s from another goroutine.
func (s *Stream) Bound(f func() error) error {
	if s.bound {
		return f()
	}
	unbind, err := s.c.bind()
	if err != nil {
		return err
	}
	s.bound = true
	defer func() {
		s.bound = false
		unbind()
	}()
	return f()
}

// NewStream creates a stream (default flags: it synchronises with the
// legacy default stream).
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{c: c}
	err := c.do(func() error { return check(cu.streamCreate(&s.h, 0), "cuStreamCreate", "") })
	if err == nil {
		s.page, s.pageMem = newLaunchPage()
	}
	return s, err
}

// Destroy destroys the stream once its work is done.
func (s *Stream) Destroy() error {
	err := s.c.do(func() error { return check(cu.streamDestroy(s.h), "cuStreamDestroy", "") })
	if s.pageMem != nil {
		syscall.Munmap(s.pageMem)
		s.page, s.pageMem = nil, nil
	}
	return err
}

// Sync waits for the stream's work; what names the point (e.g. "after layer
// 3") for the error of a kernel that failed asynchronously.
func (s *Stream) Sync(what string) error {
	if s.tape != nil {
		if err := s.flush(); err != nil {
			return err
		}
	}
	return s.c.do(func() error { return check(cu.streamSync(s.h), "cuStreamSynchronize", what) })
}

// Upload copies src (host memory) to dst on the stream. The driver stages
// pageable memory before it returns, so src may be reused at once.
func (s *Stream) Upload(dst Ptr, src []byte, what string) error {
	if len(src) == 0 {
		return nil
	}
	if t := s.tape; t != nil {
		if len(src) <= maxStagedUpload {
			t.ops = append(t.ops, tapeOp{kind: opUpload, dst: dst, src: Ptr(len(t.stage)), bytes: uint64(len(src)), what: what})
			t.stage = append(t.stage, src...)
			return nil
		}
		if err := s.flush(); err != nil {
			return err
		}
	}
	return s.c.do(func() error {
		r := cu.memcpyHtoDAsync(uint64(dst), unsafe.Pointer(&src[0]), uint64(len(src)), s.h)
		runtime.KeepAlive(src)
		if r == Success {
			return nil
		}
		return check(r, "cuMemcpyHtoDAsync", fmt.Sprintf("of %s to %q", Size(uint64(len(src))), what))
	})
}

// Download copies len(dst) bytes from src to host memory. Into pageable
// memory the copy has completed when the call returns (the driver's rule
// for pageable destinations), after the stream's earlier work.
func (s *Stream) Download(dst []byte, src Ptr, what string) error {
	if len(dst) == 0 {
		return nil
	}
	if s.tape != nil {
		if err := s.flush(); err != nil {
			return err
		}
	}
	return s.c.do(func() error {
		r := cu.memcpyDtoHAsync(unsafe.Pointer(&dst[0]), uint64(src), uint64(len(dst)), s.h)
		runtime.KeepAlive(dst)
		if r != Success {
			return check(r, "cuMemcpyDtoHAsync", fmt.Sprintf("of %s from %q", Size(uint64(len(dst))), what))
		}
		if r := cu.streamSync(s.h); r != Success {
			return check(r, "cuStreamSynchronize", fmt.Sprintf("after reading %q", what))
		}
		return nil
	})
}

// Copy copies bytes between device buffers on the stream.
func (s *Stream) Copy(dst, src Ptr, bytes int, what string) error {
	if bytes == 0 {
		return nil
	}
	if s.tape != nil {
		s.tape.ops = append(s.tape.ops, tapeOp{kind: opCopy, dst: dst, src: src, bytes: uint64(bytes), what: what})
		return nil
	}
	return s.c.do(func() error {
		if r := cu.memcpyDtoDAsync(uint64(dst), uint64(src), uint64(bytes), s.h); r != Success {
			return check(r, "cuMemcpyDtoDAsync", fmt.Sprintf("of %s for %q", Size(uint64(bytes)), what))
		}
		return nil
	})
}

// Memset sets bytes of dst to v on the stream.
func (s *Stream) Memset(dst Ptr, v byte, bytes int, what string) error {
	if bytes == 0 {
		return nil
	}
	if s.tape != nil {
		s.tape.ops = append(s.tape.ops, tapeOp{kind: opMemset, dst: dst, val: v, bytes: uint64(bytes), what: what})
		return nil
	}
	return s.c.do(func() error {
		if r := cu.memsetD8Async(uint64(dst), v, uint64(bytes), s.h); r != Success {
			return check(r, "cuMemsetD8Async", fmt.Sprintf("of %s of %q", Size(uint64(bytes)), what))
		}
		return nil
	})
}

// Event is a CUDA event (timing enabled).
type Event struct {
	c *Context
	h uintptr
}

// NewEvent creates an event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{c: c}
	err := c.do(func() error { return check(cu.eventCreate(&e.h, 0), "cuEventCreate", "") })
	return e, err
}

// Record records the event on s.
func (e *Event) Record(s *Stream) error {
	return e.c.do(func() error { return check(cu.eventRecord(e.h, s.h), "cuEventRecord", "") })
}

// Since waits for e and returns the milliseconds between start and e.
func (e *Event) Since(start *Event) (float32, error) {
	var ms float32
	err := e.c.do(func() error {
		if err := check(cu.eventSync(e.h), "cuEventSynchronize", ""); err != nil {
			return err
		}
		return check(cu.eventElapsed(&ms, start.h, e.h), "cuEventElapsedTime", "")
	})
	return ms, err
}

// Destroy destroys the event.
func (e *Event) Destroy() error {
	return e.c.do(func() error { return check(cu.eventDestroy(e.h), "cuEventDestroy", "") })
}

// Module is a loaded fatbin, cubin or PTX image.
type Module struct {
	c    *Context
	h    uintptr
	what string
}

// LoadModule loads an image (a fatbin: the driver picks the machine code for
// the GPU, or JIT-compiles the PTX); what names it in errors.
func (c *Context) LoadModule(image []byte, what string) (*Module, error) {
	if len(image) == 0 {
		return nil, fmt.Errorf("cuModuleLoadData of %q: empty image", what)
	}
	m := &Module{c: c, what: what}
	err := c.do(func() error {
		r := cu.moduleLoadData(&m.h, unsafe.Pointer(&image[0]))
		runtime.KeepAlive(image)
		return check(r, "cuModuleLoadData", fmt.Sprintf("of %q (%s)", what, Size(uint64(len(image)))))
	})
	return m, err
}

// Unload unloads the module.
func (m *Module) Unload() error {
	return m.c.do(func() error { return check(cu.moduleUnload(m.h), "cuModuleUnload", fmt.Sprintf("of %q", m.what)) })
}

// Function is a kernel of a module.
type Function struct {
	h    uintptr
	Name string
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (Function, error) {
	f := Function{Name: name}
	err := m.c.do(func() error {
		return check(cu.moduleGetFunc(&f.h, m.h, name), "cuModuleGetFunction", fmt.Sprintf("%q in %q", name, m.what))
	})
	return f, err
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z uint32 }

// Arg is one kernel parameter, widened to 8 bytes (the driver reads as many
// bytes as the kernel's parameter has, from the start: little-endian).
type Arg uint64

// P makes a kernel parameter of a device pointer.
func P(p Ptr) Arg { return Arg(p) }

// I makes a kernel parameter of a 32-bit int.
func I(v int) Arg { return Arg(uint32(int32(v))) }

// L makes a kernel parameter of a 64-bit integer (long long).
func L(v int) Arg { return Arg(uint64(int64(v))) }

// F makes a kernel parameter of a float.
func F(v float32) Arg { return Arg(math.Float32bits(v)) }

// Launch launches f on s; what names the op in errors. A launch that fails
// asynchronously is reported by the next synchronisation. Recording (a
// tape), it appends the launch instead.
func (s *Stream) Launch(f Function, grid, block Dim3, shmem int, what string, args ...Arg) error {
	if s.tape != nil {
		s.tape.recordArgs(f, grid, block, shmem, what, args)
		return nil
	}
	if lp := s.page; lp != nil && len(args) <= maxPageArgs {
		copy(lp.args[:], args)
		return s.launch(f, grid, block, shmem, what, lp.ptrs[:len(args)+1])
	}
	if len(s.ptrs) < len(args)+1 {
		s.ptrs = make([]unsafe.Pointer, 2*len(args)+1)
	}
	ptrs := s.ptrs
	held := append([]Arg(nil), args...) // pinned here, so args itself stays the caller's (on its stack)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&ptrs[0])
	if len(held) > 0 {
		pin.Pin(&held[0])
	}
	for i := range held {
		ptrs[i] = unsafe.Pointer(&held[i])
	}
	return s.launch(f, grid, block, shmem, what, ptrs)
}

// LaunchBytes is Launch with each parameter given as its bytes (a struct
// passed by value is its C layout, little-endian).
func (s *Stream) LaunchBytes(f Function, grid, block Dim3, shmem int, what string, params ...[]byte) error {
	if s.tape != nil {
		return s.tape.recordLaunch(f, grid, block, shmem, what, params)
	}
	ptrs := make([]unsafe.Pointer, len(params)+1) // +1: never empty
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&ptrs[0])
	for i, p := range params {
		if len(p) == 0 {
			return fmt.Errorf("cuLaunchKernel of %s for %s: parameter %d is empty", f.Name, what, i)
		}
		pin.Pin(&p[0])
		ptrs[i] = unsafe.Pointer(&p[0])
	}
	err := s.launch(f, grid, block, shmem, what, ptrs)
	runtime.KeepAlive(params)
	return err
}

func (s *Stream) launch(f Function, grid, block Dim3, shmem int, what string, ptrs []unsafe.Pointer) error {
	if s.bound {
		return s.launchChecked(f, grid, block, shmem, what, ptrs)
	}
	return s.c.do(func() error { return s.launchChecked(f, grid, block, shmem, what, ptrs) })
}

// launchChecked launches f on s (the context current on this thread) and
// counts it.
func (s *Stream) launchChecked(f Function, grid, block Dim3, shmem int, what string, ptrs []unsafe.Pointer) error {
	r := s.launchKernel(f.h, grid, block, uint32(shmem), ptrs)
	s.count.Launches++
	s.count.Kernels++
	if r == Success {
		return nil
	}
	return check(r, "cuLaunchKernel", fmt.Sprintf("of %s for %s (grid %d×%d×%d, block %d×%d×%d)",
		f.Name, what, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z))
}

// launchConfig and launchAttr are CUlaunchConfig and CUlaunchAttribute
// (cuda.h; 56 and 72 bytes on 64-bit hosts).
type launchConfig struct {
	gx, gy, gz, bx, by, bz, shmem uint32
	_                             uint32
	stream                        uintptr
	attrs                         *launchAttr
	numAttrs                      uint32
	_                             uint32
}

type launchAttr struct {
	id  uint32
	_   uint32
	val [64]byte
}

// attrProgrammaticSerialization is CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION.
const attrProgrammaticSerialization = 6

// pdlLaunch is a stream's reused launch configuration for programmatic
// launches (one attribute: programmatic stream serialization allowed).
type pdlLaunch struct {
	cfg  launchConfig
	attr launchAttr
}

// SetProgrammaticLaunch makes the stream launch kernels with programmatic
// dependent launch (Hopper): a kernel may begin launching before the one
// before it has finished, so every kernel launched on s must wait first
// (griddepcontrol.wait) before it touches memory: turn it on only for
// images whose kernels all do. It reports whether the launches are now
// programmatic: false when off, or when the driver lacks cuLaunchKernelEx.
// Stream capture keeps the dependency as a programmatic edge of the graph.
func (s *Stream) SetProgrammaticLaunch(on bool) bool {
	if !on || cu.launchKernelEx == nil {
		s.pdl = nil
		return false
	}
	p := &pdlLaunch{}
	p.attr.id = attrProgrammaticSerialization
	p.attr.val[0] = 1 // programmaticStreamSerializationAllowed (an int)
	p.cfg.numAttrs = 1
	s.pdl = p
	if s.page != nil {
		s.page.attr = p.attr
	}
	return true
}

// ProgrammaticLaunch reports whether s launches kernels programmatically.
func (s *Stream) ProgrammaticLaunch() bool { return s.pdl != nil }

// launchKernel launches f on s, programmatically when s.pdl is set; it
// runs on the context's thread (inside c.do) with ptrs pinned.
func (s *Stream) launchKernel(f uintptr, grid, block Dim3, shmem uint32, ptrs []unsafe.Pointer) Result {
	p := s.pdl
	if p == nil {
		return cu.launchKernel(f, grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, shmem, s.h, &ptrs[0], 0)
	}
	if lp := s.page; lp != nil { // the config in the page (its attribute set by SetProgrammaticLaunch): nothing to pin
		lp.cfg = launchConfig{gx: grid.X, gy: grid.Y, gz: grid.Z, bx: block.X, by: block.Y, bz: block.Z, shmem: shmem,
			stream: s.h, attrs: &lp.attr, numAttrs: 1}
		return cu.launchKernelEx(&lp.cfg, f, &ptrs[0], 0)
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(p)
	p.cfg = launchConfig{gx: grid.X, gy: grid.Y, gz: grid.Z, bx: block.X, by: block.Y, bz: block.Z, shmem: shmem,
		stream: s.h, attrs: &p.attr, numAttrs: 1}
	return cu.launchKernelEx(&p.cfg, f, &ptrs[0], 0)
}
