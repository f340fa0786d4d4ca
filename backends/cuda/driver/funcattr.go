package driver

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// funcSetAttr is cuFuncSetAttribute, bound on first use (kept out of the
// required symbols: only kernels with over 48 KiB of dynamic shared memory
// need it).
var funcSetAttr struct {
	once sync.Once
	fn   func(f uintptr, attr int32, v int32) Result
	err  error
}

// attrMaxDynamicShared is CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
const attrMaxDynamicShared = 8

// SetMaxDynamicShared lets f launch with up to bytes of dynamic shared
// memory (past the default 48 KiB; the H200 allows 227 KiB a block).
func (m *Module) SetMaxDynamicShared(f Function, bytes int) error {
	funcSetAttr.once.Do(func() {
		if err := Load(); err != nil {
			funcSetAttr.err = err
			return
		}
		h, err := purego.Dlopen(LibName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			funcSetAttr.err = fmt.Errorf("cuFuncSetAttribute: %v", err)
			return
		}
		if _, err := purego.Dlsym(h, "cuFuncSetAttribute"); err != nil {
			funcSetAttr.err = fmt.Errorf("driver too old: %s has no cuFuncSetAttribute", LibName)
			return
		}
		purego.RegisterLibFunc(&funcSetAttr.fn, h, "cuFuncSetAttribute")
	})
	if funcSetAttr.err != nil {
		return funcSetAttr.err
	}
	return m.c.do(func() error {
		return check(funcSetAttr.fn(f.h, attrMaxDynamicShared, int32(bytes)), "cuFuncSetAttribute",
			fmt.Sprintf("max dynamic shared memory %d of %s", bytes, f.Name))
	})
}
