package driver

import (
	"errors"
	"unsafe"
)

// Simulate installs, in place of libcuda.so.1, a driver that runs nothing:
// one Hopper GPU whose allocations are distinct addresses with no memory
// behind them, whose copies, memsets and launches succeed without effect
// (reads give zeros), and whose graph functions capture a chain of nodes.
// It is for tests without a GPU that look at what a program launches (the
// launches of a step, what a graph replays, which nodes change between
// steps), never at results. It must be called before anything loads the
// driver, and holds for the rest of the process.
func Simulate() error {
	done := false
	load.once.Do(func() {
		installSimulated()
		done = true
	})
	if !done {
		return errors.New("driver: Simulate after the driver was loaded")
	}
	return nil
}

// sim is the simulated driver's state.
var sim struct {
	next      uint64 // next allocation address
	capturing bool
	nodes     []uintptr // the chain being captured
	graphs    map[uintptr][]uintptr
	after     map[uintptr]uintptr // a captured node's successor
	handles   uintptr
}

func simHandle() uintptr {
	sim.handles += 16
	return 0x1000 + sim.handles
}

func simNode() {
	if sim.capturing {
		sim.nodes = append(sim.nodes, simHandle())
	}
}

func installSimulated() {
	sim.next, sim.graphs, sim.after = 1<<40, map[uintptr][]uintptr{}, map[uintptr]uintptr{}
	ok := Success
	cu.init = func(uint32) Result { return ok }
	cu.driverGetVersion = func(v *int32) Result { *v = MinDriverVersion; return ok }
	cu.deviceGetCount = func(n *int32) Result { *n = 1; return ok }
	cu.deviceGet = func(d *int32, o int32) Result { *d = o; return ok }
	cu.deviceGetName = func(name *byte, n int32, d int32) Result {
		b := unsafe.Slice(name, n)
		b[copy(b[:n-1], "simulated GPU")] = 0
		return ok
	}
	cu.deviceGetAttr = func(v *int32, a int32, d int32) Result {
		switch a {
		case attrCCMajor:
			*v = 9
		case attrSMCount:
			*v = 132
		default:
			*v = 0
		}
		return ok
	}
	cu.deviceTotalMem = func(b *uint64, d int32) Result { *b = 140 << 30; return ok }
	cu.primaryRetain = func(c *uintptr, d int32) Result { *c = 1; return ok }
	cu.primaryRelease = func(int32) Result { return ok }
	cu.ctxSetCurrent = func(uintptr) Result { return ok }
	cu.memAlloc = func(p *uint64, n uint64) Result {
		*p = sim.next
		sim.next += (n + 511) &^ 255
		return ok
	}
	cu.memFree = func(uint64) Result { return ok }
	cu.memGetInfo = func(f, t *uint64) Result { *f, *t = 139<<30, 140<<30; return ok }
	cu.memcpyHtoDAsync = func(uint64, unsafe.Pointer, uint64, uintptr) Result { simNode(); return ok }
	cu.memcpyDtoHAsync = func(dst unsafe.Pointer, _ uint64, n uint64, _ uintptr) Result {
		clear(unsafe.Slice((*byte)(dst), n))
		return ok
	}
	cu.memcpyDtoDAsync = func(uint64, uint64, uint64, uintptr) Result { simNode(); return ok }
	cu.memsetD8Async = func(uint64, uint8, uint64, uintptr) Result { simNode(); return ok }
	cu.streamCreate = func(s *uintptr, _ uint32) Result { *s = simHandle(); return ok }
	cu.streamSync = func(uintptr) Result { return ok }
	cu.streamDestroy = func(uintptr) Result { return ok }
	cu.eventCreate = func(e *uintptr, _ uint32) Result { *e = simHandle(); return ok }
	cu.eventRecord = func(uintptr, uintptr) Result { return ok }
	cu.eventSync = func(uintptr) Result { return ok }
	cu.eventElapsed = func(ms *float32, _, _ uintptr) Result { *ms = 0.001; return ok }
	cu.eventDestroy = func(uintptr) Result { return ok }
	cu.moduleLoadData = func(m *uintptr, _ unsafe.Pointer) Result { *m = simHandle(); return ok }
	cu.moduleUnload = func(uintptr) Result { return ok }
	cu.moduleGetFunc = func(f *uintptr, _ uintptr, _ string) Result { *f = simHandle(); return ok }
	cu.launchKernel = func(uintptr, uint32, uint32, uint32, uint32, uint32, uint32, uint32, uintptr, *unsafe.Pointer, uintptr) Result {
		simNode()
		return ok
	}
	cu.getErrorName = func(Result, **byte) Result { return 1 }
	cu.getErrorString = func(Result, **byte) Result { return 1 }
	cu.beginCapture = func(uintptr, uint32) Result { sim.capturing, sim.nodes = true, nil; return ok }
	cu.endCapture = func(_ uintptr, g *uintptr) Result {
		*g = simHandle()
		sim.graphs[*g], sim.capturing = sim.nodes, false
		for i := 1; i < len(sim.nodes); i++ {
			sim.after[sim.nodes[i-1]] = sim.nodes[i]
		}
		return ok
	}
	cu.graphInstantiate = func(e *uintptr, _ uintptr, _ uint64) Result { *e = simHandle(); return ok }
	cu.graphLaunch = func(uintptr, uintptr) Result { return ok }
	cu.graphExecDestroy = func(uintptr) Result { return ok }
	cu.graphDestroy = func(g uintptr) Result { delete(sim.graphs, g); return ok }
	cu.graphGetRootNodes = func(g uintptr, nodes *uintptr, n *uint64) Result {
		ns := sim.graphs[g]
		if len(ns) == 0 {
			*n = 0
			return ok
		}
		*nodes, *n = ns[0], 1
		return ok
	}
	cu.nodeGetDependents = func(node uintptr, nodes *uintptr, n *uint64) Result {
		if x, found := sim.after[node]; found {
			*nodes, *n = x, 1
		} else {
			*n = 0
		}
		return ok
	}
	cu.execKernelSetParams = func(uintptr, uintptr, unsafe.Pointer) Result { return ok }
	cu.execMemsetSetParams = func(uintptr, uintptr, unsafe.Pointer, uintptr) Result { return ok }
	cu.execMemcpySetParams = func(uintptr, uintptr, unsafe.Pointer, uintptr) Result { return ok }
}
