package engine

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
)

// Memory accounting: before a session allocates anything, NewSession
// computes the bytes it will need and refuses when they exceed the limit
// (Options.MaxMemory, or MemAvailable of /proc/meminfo), so that an absurd
// -max-len is an error message and not an out-of-memory crash.

// MemoryNeed is the estimate of the bytes one session needs on the host.
type MemoryNeed struct {
	Caches      int64 // persistent state (KV caches, compressor state, Engram history)
	Ropes       int64 // RoPE tables of length M
	Activations int64 // peak of the live intermediate values of one call (prefill or decode)
}

// Total is the sum of the parts (saturating).
func (n MemoryNeed) Total() int64 { return ir.SatAdd(ir.SatAdd(n.Caches, n.Ropes), n.Activations) }

// typeBytes is the size of a value of type t under b as the buffers hold
// it (backends.TypeBytes: floats in f32; saturating).
func typeBytes(t ir.Type, b ir.Bindings) int64 { return backends.TypeBytes(t, b) }

// SessionMemory estimates the bytes a session of opt needs: the state
// tensors (B × M sized caches), the RoPE tables and the activation buffers
// of one prefill of opt.PrefillLen tokens (MaxLen if 0) plus those of one
// decode step (the session keeps an arena per graph).
func (m *Model) SessionMemory(opt Options) MemoryNeed {
	pre, dec := m.callBindings(opt)
	var need MemoryNeed
	ropes := map[string]bool{}
	for _, n := range m.pg.Nodes {
		switch n.Op {
		case "state":
			need.Caches = ir.SatAdd(need.Caches, typeBytes(n.Type, dec))
		case "rope_table":
			if key := fmt.Sprint(n.Attrs); !ropes[key] {
				ropes[key] = true
				need.Ropes = ir.SatAdd(need.Ropes, typeBytes(n.Type, pre))
			}
		}
	}
	pg := m.pg
	if opt.FullLogits {
		pg = m.pgFull
	}
	need.Activations = ir.SatAdd(activationBytes(pg, pre, nil), activationBytes(m.dg, dec, nil))
	if m.chunks(opt) {
		cb := m.chunkBindings(opt)
		need.Activations = ir.SatAdd(need.Activations, activationBytes(m.cg, cb, hostSkip(cb)))
	}
	return need
}

// chunks reports whether a session of opt may prefill in chunks: the model
// can, chunking is on and the prompt (MaxLen when unknown) is longer than a
// chunk.
func (m *Model) chunks(opt Options) bool {
	S := opt.PrefillLen
	if S <= 0 || S > opt.MaxLen {
		S = opt.MaxLen
	}
	return m.chunk != nil && opt.PrefillChunk > 0 && S > opt.PrefillChunk
}

// callBindings are opt.callBindings, the prefill call at most a chunk long
// when the session may prefill in chunks (a longer prompt takes the chunk
// graph).
func (m *Model) callBindings(opt Options) (prefill, decode ir.Bindings) {
	pre, dec := opt.callBindings()
	if m.chunks(opt) {
		pre.S = min(pre.S, int64(opt.PrefillChunk))
	}
	return pre, dec
}

// chunkBindings are the sizes of the largest chunk call of a session of
// opt: PrefillChunk tokens ending at the end of the prompt (PrefillLen,
// else MaxLen: the compressed rows a chunk reads grow with its position).
func (m *Model) chunkBindings(opt Options) ir.Bindings {
	pre, _ := opt.callBindings()
	c := min(int64(max(opt.ChunkSize(), 1)), pre.S)
	return ir.Bindings{B: pre.B, S: c, M: pre.M, P: pre.S - c}
}

// ChunkSize is the chunk a session of opt prefills a long prompt in:
// PrefillChunk, smaller for a long PrefillLen (longPromptChunk); 0 when
// chunking is off. The session's chunk arena is sized for it.
func (opt Options) ChunkSize() int {
	if opt.PrefillChunk <= 0 {
		return 0
	}
	pre, _ := opt.callBindings()
	return longPromptChunk(opt.PrefillChunk, int(pre.S))
}

// callBindings are the sizes of the largest prefill call of a session of
// opt (PrefillLen tokens, MaxLen if 0 or larger) and of its decode steps at
// the last position.
func (opt Options) callBindings() (prefill, decode ir.Bindings) {
	B, M := int64(max(opt.Batch, 0)), int64(max(opt.MaxLen, 0))
	S := int64(opt.PrefillLen)
	if S <= 0 || S > M {
		S = M
	}
	pb := B
	if opt.PrefillBatch > 0 && int64(opt.PrefillBatch) < B {
		pb = int64(opt.PrefillBatch)
	}
	return ir.Bindings{B: pb, S: S, M: M}, ir.Bindings{B: B, S: 1, M: M, P: max(M-1, 0)}
}

// ownsMemory reports whether a node's value takes memory of its own:
// sources, state updates (in place) and views (reshape, probe) do not.
func ownsMemory(n *ir.Node) bool {
	info := n.Info()
	return info != nil && !info.Has(ir.Source) && !info.Has(ir.StateUpdate) && !ir.IsView(n.Op)
}

// activationBytes is the memory the values of one call of g take. With the
// plan's buffer slots it is what the arena holds, the largest value of
// each kind in each slot, plus the values without a slot (outputs);
// without slots (a graph that skipped assign-buffers) every value is freed
// after its last use, so it is the peak of the live values. Values skip
// reports take no arena storage (hostSkip's; nil skips none).
func activationBytes(g *ir.Graph, b ir.Bindings, skip func(*ir.Node) bool) int64 {
	if g == nil {
		return 0
	}
	slots := backends.PlanSlots(g, b, skip)
	if len(slots) == 0 {
		return peakLive(g, b)
	}
	var total int64
	for _, n := range g.Nodes {
		if k, ok := n.Attrs["buf"].(int64); ownsMemory(n) && (!ok || k < 0 || skip != nil && skip(n) && n.Type.DType == ir.U8) {
			// (u8 values are allocated apart from the arena)
			total = ir.SatAdd(total, typeBytes(n.Type, b))
		}
	}
	for _, s := range slots {
		total = ir.SatAdd(total, s.Total())
	}
	return total
}

// peakLive simulates one call of g in which every value is allocated when
// its node runs and freed after its last use.
func peakLive(g *ir.Graph, b ir.Bindings) int64 {
	uses := g.UseCounts()
	size := map[*ir.Node]int64{}
	var live, peak int64
	for _, n := range g.Nodes {
		if ownsMemory(n) {
			size[n] = typeBytes(n.Type, b)
		}
		live = ir.SatAdd(live, size[n])
		peak = max(peak, live)
		for _, a := range n.Args {
			if uses[a]--; uses[a] == 0 {
				live -= size[a]
			}
		}
	}
	return peak
}

// checkMemory refuses a session whose estimated need exceeds the limit:
// opt.MaxMemory when positive, else the free memory of the primary device
// (MemAvailable on the host; no check when neither is known, or when
// opt.MaxMemory is negative).
func (m *Model) checkMemory(opt Options) error {
	return m.CheckMemory(opt, "lower -max-len or the batch")
}

// CheckMemory refuses, before anything is allocated, a session of opt
// whose estimated need exceeds the limit (checkMemory), ending the
// message with hint (what to lower).
func (m *Model) CheckMemory(opt Options, hint string) error {
	limit, what := m.MemoryLimit(opt.MaxMemory)
	if limit <= 0 {
		return nil
	}
	need := m.SessionMemory(opt)
	if t := need.Total(); t > limit {
		total := fmt.Sprintf("%d bytes (%s", t, FormatBytes(t))
		if t == math.MaxInt64 {
			total = "more than 2^63 bytes (the estimate saturates"
		}
		return fmt.Errorf("a session of batch %d and maximum length %d needs %s: caches %s, RoPE tables %s, activations %s), more than %s of %d bytes (%s): %s",
			opt.Batch, opt.MaxLen, total, sizeText(need.Caches), sizeText(need.Ropes), sizeText(need.Activations), what, limit, FormatBytes(limit), hint)
	}
	return nil
}

// sizeText is FormatBytes of an estimate that may have saturated.
func sizeText(n int64) string {
	if n == math.MaxInt64 {
		return "over 8.0 EiB"
	}
	return FormatBytes(n)
}

// MemoryLimit is the limit a session is checked against, and its name in
// messages: maxMemory when
// positive, else the primary device's free memory (MemAvailable for a
// host backend); 0 when there is none (maxMemory negative, or the device
// cannot say).
func (m *Model) MemoryLimit(maxMemory int64) (int64, string) {
	switch {
	case maxMemory > 0:
		return maxMemory, "the -max-memory limit"
	case maxMemory < 0:
		return 0, ""
	}
	d := m.Device()
	if d == nil {
		return 0, ""
	}
	free, _, err := d.Memory()
	if err != nil {
		return 0, ""
	}
	if m.primaryHost {
		return free, "available memory (MemAvailable)"
	}
	return free, "the free memory of " + d.Describe()
}

// FormatBytes renders n in binary units (e.g. "1.5 GiB").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f, i := float64(n), 0
	for f >= unit && i < 6 {
		f /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", f, "KMGTPE"[i-1])
}

// ParseBytes parses a byte count with an optional binary suffix: 123, 64K,
// 512M, 2G, 1T (also KiB/MiB/GiB/TiB, KB/MB/GB/TB, all powers of 1024).
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	up := strings.ToUpper(t)
	for _, suf := range []struct {
		s string
		m int64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(up, suf.s) {
			t, mult = strings.TrimSpace(t[:len(t)-len(suf.s)]), suf.m
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a byte count (e.g. 1073741824, 512M, 2G)", s)
	}
	if v > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * mult, nil
}
