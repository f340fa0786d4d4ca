package cuda

import (
	"os"
	"reflect"
	"strings"

	"github.com/ds4go/ds4/backends/cuda/driver"
	"github.com/ds4go/ds4/ir"
)

// Node memos: in a recorded (graph) call, a node whose launcher depends on
// nothing but its arguments, the call's sizes and its arena's buffers
// queues exactly what it queued the last time those were the same. Its
// recorded operations and output are kept, and a later call with the same
// arguments (pointers, dtypes, shapes, layouts), the same B, S and M, the
// same arena and no arena buffer (re)allocated since appends them to its
// tape instead of running the launcher: the host's work of a decode step
// shrinks to the nodes that read the start position and what follows from
// it. Never memoised: the leaves (inputs, weights, state, tables: they
// read the call's environment), probes, the ops that read the start
// position (a reshape to a shape naming P among them), fused runs (their nodes pass state to one another), and a node
// whose recording holds an upload or ran mid-call (a sync).
//
// DS4_CUDA_MEMO=off runs every launcher; DS4_CUDA_MEMO=verify runs every
// launcher and checks that a memoised node would have queued the same.

// noMemo are the ops never memoised. A launcher that reads the call's
// start position (c.P) or its environment must be listed here (the
// simulated DS4_CUDA_MEMO=verify test, simtest, catches one that is not).
var noMemo = map[string]bool{
	"input": true, "weight": true, "const": true, "state": true, "rope_table": true, "probe": true,
	// the start position
	"positions": true, "window_idx": true, "window_update": true, "group_state_update": true,
	"compressor_pool": true, "cache_write": true, "cache_read": true, "index_mask": true,
	"candidate_blocks": true, "index_topk": true, "engram_hist_update": true, "engram_hash": true,
}

// memoMode is DS4_CUDA_MEMO: "" (on), "off" or "verify".
func memoMode() string { return os.Getenv("DS4_CUDA_MEMO") }

// nodeMemo is what one node queued in the last recorded call.
type nodeMemo struct {
	ok      bool
	args    []argKey
	arena   *Arena
	gen     int64
	b, s, m int
	out     *Value
	rec     driver.Recording
}

// argKey is what a launcher reads of an argument.
type argKey struct {
	ptr   driver.Ptr
	dt    ir.DType
	w     *Layout
	host  uint64 // FNV-1a of the host values
	nhost int
	shape [6]int
	rank  int
}

func keyOf(v *Value) (argKey, bool) {
	k := argKey{ptr: v.Ptr, dt: v.DType, w: v.W, host: v.hostKey(), nhost: len(v.Host), rank: len(v.Shape)}
	if len(v.Shape) > len(k.shape) {
		return k, false
	}
	copy(k.shape[:], v.Shape)
	return k, true
}

// hostKey is the FNV-1a hash of v.Host, computed once a slice: host values
// are set where a Value is made and never changed in place, and hashing
// the Engram token map (the vocabulary's ids, 1 MiB) at each of its
// lookups' hit and store took ~0.55 ms of the host's time a decode step,
// before the step's first graph could start.
func (v *Value) hostKey() uint64 {
	if len(v.Host) == 0 {
		return 14695981039346656037
	}
	if v.hashOf != &v.Host[0] || v.hashN != len(v.Host) {
		h := uint64(14695981039346656037)
		for _, x := range v.Host {
			h = (h ^ uint64(x)) * 1099511628211
		}
		v.hashOf, v.hashN, v.hash = &v.Host[0], len(v.Host), h
	}
	return v.hash
}

// memoable marks the nodes of p that may be memoised (after fusion
// replaced the steps of its runs).
func (p *Program) memoable() []bool {
	if memoMode() == "off" {
		return nil
	}
	outs := map[*ir.Node]bool{} // the segment's outputs: the caller owns them (and may free them)
	for _, n := range p.seg.Out {
		outs[n] = true
	}
	out := make([]bool, len(p.seg.Nodes))
	for i, n := range p.seg.Nodes {
		f, ok := ops[n.Op]
		out[i] = ok && !noMemo[n.Op] && !outs[n] && reflect.ValueOf(f).Pointer() == reflect.ValueOf(p.steps[i]).Pointer() &&
			!(n.Op == "reshape" && strings.Contains(n.Attrs.Str("shape", ""), "P")) // a shape of the start position
	}
	return out
}

// hit reports whether m holds node i's launches for this call's args.
func (m *nodeMemo) hit(c *call, args []*Value) bool {
	if !m.ok || m.arena != c.a || m.gen != c.a.gen || m.b != c.B || m.s != c.S || m.m != c.M || len(args) != len(m.args) {
		return false
	}
	for k, a := range args {
		key, ok := keyOf(a)
		if !ok || key != m.args[k] {
			return false
		}
	}
	return true
}

// store keeps what node i queued since mark (false: not replayable).
func (m *nodeMemo) store(c *call, args []*Value, out *Value, t *driver.Tape, mark driver.Mark) {
	m.ok = false
	if out == nil || !t.Slice(mark, &m.rec) {
		return
	}
	m.args = m.args[:0]
	for _, a := range args {
		key, ok := keyOf(a)
		if !ok {
			return
		}
		m.args = append(m.args, key)
	}
	m.arena, m.gen, m.b, m.s, m.m, m.out, m.ok = c.a, c.a.gen, c.B, c.S, c.M, out, true
}

// sameOut reports whether two outputs of a node are the same value.
func sameOut(a, b *Value) bool {
	ka, oka := keyOf(a)
	kb, okb := keyOf(b)
	return oka && okb && ka == kb
}
