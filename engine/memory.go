package engine

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

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
func (n MemoryNeed) Total() int64 { return satAdd(satAdd(n.Caches, n.Ropes), n.Activations) }

// satMul and satAdd saturate at math.MaxInt64 (operands are ≥ 0).
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// hostBytes is the size of one element as the CPU backend holds it: float
// values of every float dtype live in float32.
func hostBytes(dt ir.DType) int64 {
	switch dt {
	case ir.I64:
		return 8
	case ir.I32:
		return 4
	case ir.I8, ir.U8, ir.Bool:
		return 1
	}
	if dt.IsFloat() {
		return 4
	}
	if b := dt.Bits(); b >= 8 {
		return int64(b / 8)
	}
	return 1
}

// dimEnv binds the run-time symbols of a shape.
type dimEnv struct{ B, S, M, P int64 }

// typeBytes is the host size of a value of type t under env (saturating). A
// dimension it cannot evaluate counts as M, the largest run-time size.
func typeBytes(t ir.Type, env dimEnv) int64 {
	n := hostBytes(t.DType)
	for _, d := range t.Shape {
		v := d.N
		if !d.IsConst() {
			var ok bool
			if v, ok = evalDim(d.Sym, env); !ok || v < 0 {
				v = env.M
			}
		}
		n = satMul(n, v)
	}
	return n
}

// SessionMemory estimates the bytes a session of opt needs: the state
// tensors (B × M sized caches), the RoPE tables and the peak of the live
// values of one prefill of opt.PrefillLen tokens (MaxLen if 0) or one decode
// step, simulated in the order the CPU backend runs the nodes and frees
// values after their last use.
func (m *Model) SessionMemory(opt Options) MemoryNeed {
	B, M := int64(max(opt.Batch, 0)), int64(max(opt.MaxLen, 0))
	S := int64(opt.PrefillLen)
	if S <= 0 || S > M {
		S = M
	}
	var need MemoryNeed
	ropes := map[string]bool{}
	for _, n := range m.pg.Nodes {
		switch n.Op {
		case "state":
			need.Caches = satAdd(need.Caches, typeBytes(n.Type, dimEnv{B: B, S: S, M: M}))
		case "rope_table":
			if key := fmt.Sprint(n.Attrs); !ropes[key] {
				ropes[key] = true
				need.Ropes = satAdd(need.Ropes, typeBytes(n.Type, dimEnv{B: B, S: S, M: M}))
			}
		}
	}
	pre := peakLive(m.pg, dimEnv{B: B, S: S, M: M, P: 0})
	dec := peakLive(m.dg, dimEnv{B: B, S: 1, M: M, P: max(M-1, 0)})
	need.Activations = max(pre, dec)
	return need
}

// peakLive simulates one call of g: every node's value is allocated when it
// runs and freed after its last use; sources that the session or the
// checkpoint already hold (weights, state, RoPE tables) and state updates
// (done in place) take no new memory.
func peakLive(g *ir.Graph, env dimEnv) int64 {
	if g == nil {
		return 0
	}
	uses := map[*ir.Node]int{}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			uses[a]++
		}
	}
	for _, o := range g.Outputs {
		uses[o.Node]++
	}
	size := map[*ir.Node]int64{}
	var live, peak int64
	for _, n := range g.Nodes {
		var b int64
		switch {
		case n.Op == "weight" || n.Op == "state" || n.Op == "rope_table":
		case n.Info() != nil && n.Info().Flags&ir.StateUpdate != 0:
		default:
			b = typeBytes(n.Type, env)
		}
		size[n] = b
		live = satAdd(live, b)
		peak = max(peak, live)
		for _, a := range n.Args {
			if uses[a]--; uses[a] == 0 {
				live -= size[a]
			}
		}
	}
	return peak
}

// AvailableMemory returns MemAvailable of /proc/meminfo in bytes.
func AvailableMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			break
		}
		return satMul(kb, 1024), nil
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemAvailable")
}

// checkMemory refuses a session whose estimated need exceeds the limit:
// opt.MaxMemory when positive, else MemAvailable (no check when neither is
// known, or when opt.MaxMemory is negative).
func (m *Model) checkMemory(opt Options) error {
	limit, what := opt.MaxMemory, "the -max-memory limit"
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		avail, err := AvailableMemory()
		if err != nil {
			return nil
		}
		limit, what = avail, "available memory (MemAvailable)"
	}
	need := m.SessionMemory(opt)
	if t := need.Total(); t > limit {
		return fmt.Errorf("a session of batch %d and maximum length %d needs %d bytes (%s: caches %s, RoPE tables %s, activations %s), more than %s of %d bytes (%s): lower -max-len or the batch",
			opt.Batch, opt.MaxLen, t, FormatBytes(t), FormatBytes(need.Caches), FormatBytes(need.Ropes), FormatBytes(need.Activations), what, limit, FormatBytes(limit))
	}
	return nil
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

// evalDim evaluates a symbolic dimension: integers, B, S, M, P, + - * /
// (integer division), parentheses, min(a,b) and max(a,b).
func evalDim(s string, env dimEnv) (int64, bool) {
	p := &dimParser{s: strings.ReplaceAll(s, " ", ""), env: env}
	v, ok := p.sum()
	if !ok || p.i != len(p.s) {
		return 0, false
	}
	return v, true
}

type dimParser struct {
	s   string
	i   int
	env dimEnv
}

func (p *dimParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *dimParser) sum() (int64, bool) {
	v, ok := p.product()
	for ok && (p.peek() == '+' || p.peek() == '-') {
		op := p.peek()
		p.i++
		var w int64
		if w, ok = p.product(); ok {
			if op == '+' {
				v = satAdd(max(v, 0), max(w, 0))
			} else {
				v -= w
			}
		}
	}
	return v, ok
}

func (p *dimParser) product() (int64, bool) {
	v, ok := p.atom()
	for ok && (p.peek() == '*' || p.peek() == '/') {
		op := p.peek()
		p.i++
		var w int64
		if w, ok = p.atom(); ok {
			if op == '*' {
				v = satMul(max(v, 0), max(w, 0))
			} else if w == 0 {
				return 0, false
			} else {
				v /= w
			}
		}
	}
	return v, ok
}

func (p *dimParser) atom() (int64, bool) {
	c := p.peek()
	switch {
	case c == '(':
		p.i++
		v, ok := p.sum()
		if !ok || p.peek() != ')' {
			return 0, false
		}
		p.i++
		return v, true
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		v, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
		return v, err == nil
	case strings.HasPrefix(p.s[p.i:], "min(") || strings.HasPrefix(p.s[p.i:], "max("):
		isMin := p.s[p.i:p.i+3] == "min"
		p.i += 4
		a, ok := p.sum()
		if !ok || p.peek() != ',' {
			return 0, false
		}
		p.i++
		b, ok := p.sum()
		if !ok || p.peek() != ')' {
			return 0, false
		}
		p.i++
		if isMin {
			return min(a, b), true
		}
		return max(a, b), true
	}
	p.i++
	switch c {
	case 'B':
		return p.env.B, true
	case 'S':
		return p.env.S, true
	case 'M':
		return p.env.M, true
	case 'P':
		return p.env.P, true
	}
	return 0, false
}
