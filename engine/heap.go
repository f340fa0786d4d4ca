package engine

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"github.com/ds4go/ds4/backends"
)

// The Go heap of a process that runs sessions. A prompt's calls allocate
// kernel temporaries beside their arenas, and with the collector's default
// pacing (GOGC 100) the heap grows to about twice what is live between
// collections: prefilling 8,192 tokens on the mini benchmark model, the
// process held 2.9 GiB of anonymous memory for 0.4 GiB of caches and
// arenas. So before each chunk call of a long prompt the engine raises the
// runtime's soft memory limit to the heap live at the last collection, plus
// what the call's arenas may still grow to, plus heapHeadroom for the
// kernels' own temporaries; past it the collector runs early. The limit
// only rises (sessions on other goroutines keep theirs), and a GOMEMLIMIT
// in the environment is the user's: then it is left alone. Prompts that
// fit one call keep the default pacing: on mini's 1,024-token prefill the
// limit's extra collections cost 5-10 % of the time for 0.8 GiB less peak.

// heapHeadroom is what a call may allocate outside its arenas before the
// collector must run.
const heapHeadroom = 384 << 20

var (
	heapMu       sync.Mutex
	userMemLimit = os.Getenv("GOMEMLIMIT") != ""
)

// plannedArena is an arena that knows the most it will hold
// (backends.HostArena).
type plannedArena interface {
	PlannedBytes() int64
}

// boundHeap raises the soft memory limit for a call on arenas (see above).
func boundHeap(arenas map[string]backends.Arena) {
	if userMemLimit {
		return
	}
	var pending int64
	seen := map[backends.Arena]bool{}
	for _, a := range arenas {
		if p, ok := a.(plannedArena); ok && !seen[a] {
			seen[a] = true
			pending += max(0, p.PlannedBytes()-a.Bytes())
		}
	}
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	var live int64
	if s[0].Value.Kind() == metrics.KindUint64 {
		live = int64(min(s[0].Value.Uint64(), math.MaxInt64/4))
	}
	limit := live + pending + heapHeadroom
	heapMu.Lock()
	defer heapMu.Unlock()
	if cur := debug.SetMemoryLimit(-1); cur == math.MaxInt64 || cur < limit {
		debug.SetMemoryLimit(limit)
	}
}
