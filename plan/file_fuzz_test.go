package plan_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/passes"
	"github.com/ds4go/ds4/plan"
)

// The whole-file fuzz target: a good plan of the tiny checkpoint, compiled
// as `compile -model testdata/tiny` does, mutated, read, and run in process
// as exec runs it. Each mutant must be refused with an ordinary error (exit
// 2 in exec), or run and give the unmodified plan's logits bit for bit.
// Each mutant is also tried resealed (the content hash recomputed, as a
// user could), so that the consistency checks are fuzzed, not only the
// hash. A resealed mutant whose graphs differ from the good plan's by more
// than their buffer slots is a consistent edit only the hash refuses (a
// changed epsilon, say): it may give other logits, but never an internal
// error. One that differs at most in buffer slots must give the same bits:
// that is what the buffer check proves.

var tiny struct {
	once     sync.Once
	plan     []byte   // the good plan file
	logits   []uint32 // its logits, every call, as bits
	graphs   string   // its graphs without buffer slots
	setupErr error
}

func tinyDir() string { return filepath.Join("..", "testdata", "tiny") }

func tinySetup(t testing.TB) {
	tiny.once.Do(func() {
		cfg, err := deepseekv4.LoadConfig(filepath.Join(tinyDir(), "config.json"))
		if err != nil {
			tiny.setupErr = err
			return
		}
		m, err := deepseekv4.BuildModule(cfg)
		if err != nil {
			tiny.setupErr = err
			return
		}
		rep, err := passes.Run(m, nil, passes.Options{})
		if err != nil {
			tiny.setupErr = err
			return
		}
		tiny.plan, err = plan.Encode(&plan.Plan{Header: plan.Header{Model: "deepseek-v4.1", ConfigFingerprint: cfg.Fingerprint(), Backend: "cpu", Passes: rep.Ran}, Module: m})
		if err != nil {
			tiny.setupErr = err
			return
		}
		p, err := plan.Decode(tiny.plan)
		if err != nil {
			tiny.setupErr = err
			return
		}
		if tiny.logits, err = runTiny(p.Module); err != nil {
			tiny.setupErr = err
			return
		}
		tiny.graphs = withoutSlots(p.Module)
	})
	if tiny.setupErr != nil {
		t.Fatal(tiny.setupErr)
	}
}

// runTiny runs a prefill of 2 rows × 9 tokens (past the window of 8 and
// the compression ratios) and 3 teacher-forced decode steps, returning
// every logit as bits.
func runTiny(m *ir.Module) ([]uint32, error) {
	md, err := engine.Open(m, tinyDir(), "cpu")
	if err != nil {
		return nil, err
	}
	defer md.Close()
	s, err := md.NewSession(engine.Options{Batch: 2, MaxLen: 12, MaxMemory: -1})
	if err != nil {
		return nil, err
	}
	var bits []uint32
	keep := func(lg *engine.Logits) {
		for _, v := range lg.Data {
			bits = append(bits, math.Float32bits(v))
		}
	}
	lg, err := s.Prefill([][]int64{{1, 2, 3, 4, 5, 6, 7, 8, 9}, {500, 40, 2, 2, 7, 300, 11, 12, 13}})
	if err != nil {
		return nil, err
	}
	keep(lg)
	for i := range 3 {
		if lg, err = s.Decode([]int64{int64(20 + i), int64(400 - i)}); err != nil {
			return nil, err
		}
		keep(lg)
	}
	return bits, nil
}

// withoutSlots is the text of m's graphs with every buf attribute removed
// (it changes m).
func withoutSlots(m *ir.Module) string {
	for _, g := range m.Graphs {
		for _, n := range g.Nodes {
			delete(n.Attrs, "buf")
		}
	}
	return ir.Format(m)
}

// checkMutant reads and runs one mutant. strict is true when every change
// the mutant may hold leaves the computation as it was (the file is sealed,
// or only the schedule and the buffer slots were edited): accepted, it must
// give the good plan's bits. Otherwise (a resealed file, see the top of the
// file) that holds only for graphs that equal the good plan's but for
// buffer slots.
func checkMutant(t *testing.T, data []byte, strict bool) {
	p, err := plan.Decode(data)
	if err != nil {
		return // refused: plan.Read's errors are ordinary (exit 2)
	}
	got, err := runTiny(p.Module)
	t.Logf("strict=%v: accepted; the run: %v", strict, err)
	var ie *engine.InternalError
	if errors.As(err, &ie) {
		t.Fatalf("strict=%v: an accepted plan ends in an internal error: %v", strict, err)
	}
	if !strict && withoutSlots(p.Module) != tiny.graphs {
		return // a consistent edit of the graphs that only the hash refuses
	}
	if err != nil {
		t.Fatalf("strict=%v: an accepted plan with the good plan's graphs fails: %v", strict, err)
	}
	if len(got) != len(tiny.logits) {
		t.Fatalf("strict=%v: %d logits, the good plan gives %d", strict, len(got), len(tiny.logits))
	}
	for i := range got {
		if got[i] != tiny.logits[i] {
			t.Fatalf("strict=%v: logit %d is %v, the good plan gives %v: an accepted plan computes something else", strict, i, math.Float32frombits(got[i]), math.Float32frombits(tiny.logits[i]))
		}
	}
}

// tinySeeds are the good plan and the edits of issue 11 that ran with wrong
// answers before plans were checked and sealed.
func tinySeeds(t testing.TB) map[string][]byte {
	tinySetup(t)
	good := tiny.plan
	lines := bytes.SplitAfter(good, []byte("\n"))
	find := func(prefix string) int {
		for i, l := range lines {
			if bytes.HasPrefix(l, []byte(prefix)) {
				return i
			}
		}
		t.Fatalf("the tiny plan has no line %q", prefix)
		return -1
	}
	swapped := func(i int) []byte {
		ls := append([][]byte(nil), lines...)
		ls[i], ls[i+1] = ls[i+1], ls[i]
		return bytes.Join(ls, nil)
	}
	replaced := func(i int, old, new string) []byte {
		ls := append([][]byte(nil), lines...)
		if !bytes.Contains(ls[i], []byte(old)) {
			t.Fatalf("line %d %q holds no %q", i, ls[i], old)
		}
		ls[i] = bytes.Replace(ls[i], []byte(old), []byte(new), 1)
		return bytes.Join(ls, nil)
	}
	out := lines[find("  output logits = ")]
	var last int
	fmt.Sscanf(string(bytes.TrimPrefix(out, []byte("  output logits = %"))), "%d", &last)
	return map[string][]byte{
		"good": good,
		// Two independent nodes (a weight and the act_quant before it).
		"swapped-lines": swapped(find("  %32 = weight")),
		// A value that is still read gets another value's slot.
		"changed-buf":      replaced(find("  %11 = token_map"), "buf=3", "buf=1"),
		"output-repointed": replaced(find("  output logits = "), fmt.Sprintf("%%%d", last), fmt.Sprintf("%%%d", last-1)),
		"nan-constant":     replaced(find("  %7 = const"), "floats=[1.0,", "floats=[nan,"),
		"unused-slot":      replaced(find("  %11 = token_map"), "buf=3", "buf=900"),
		"header-spacing":   bytes.Replace(good, []byte("DS4PLAN 2 "), []byte("DS4PLAN  2 "), 1),
	}
}

// TestPlanFileSeeds runs the seed cases of FuzzPlanFile: each must be
// refused (sealed: every edit; resealed: all but the spacing of the first
// line and an unused buffer slot, which run with the same bits).
func TestPlanFileSeeds(t *testing.T) {
	seeds := tinySeeds(t)
	accept := map[string]bool{"good": true, "header-spacing": true, "unused-slot": true}
	for name, data := range seeds {
		t.Run(name, func(t *testing.T) {
			if _, err := plan.Decode(data); (err == nil) != (name == "good" || name == "header-spacing") {
				t.Errorf("sealed: Decode error %v", err)
			}
			_, err := plan.Decode(reseal(data))
			if (err == nil) != accept[name] {
				t.Errorf("resealed: Decode error %v", err)
			}
			checkMutant(t, data, true)
			checkMutant(t, reseal(data), false)
		})
	}
}

// FuzzPlanFile mutates whole plan files of the tiny checkpoint (see the top
// of the file). Run with: go test ./plan/ -run '^$' -fuzz FuzzPlanFile.
func FuzzPlanFile(f *testing.F) {
	for _, data := range tinySeeds(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkMutant(t, data, true)
		checkMutant(t, reseal(data), false)
	})
}

// FuzzPlanEdits makes the edits a person would make to the graphs of the
// tiny plan, four bytes each (kind, node index high and low byte, value),
// reseals the file and runs it as checkMutant does. Kinds 0-4 only move
// nodes or change buffer slots: a plan they leave acceptable must compute
// the same bits (the schedule and buffer checks are what is fuzzed). Kinds
// 5-7 change what is computed; the hash refuses those, and resealed they
// must not end in an internal error. Bit 7 of the kind picks the graph.
// Run with: go test ./plan/ -run '^$' -fuzz FuzzPlanEdits.
func FuzzPlanEdits(f *testing.F) {
	tinySetup(f)
	for _, seed := range [][]byte{
		{0, 0, 32, 0},             // swap two independent nodes
		{1, 0, 11, 1},             // the changed buf
		{3, 0, 40, 0},             // hoist a node to just after its arguments
		{4, 0, 33, 0},             // sink a node to just before its first reader
		{0x83, 1, 0, 0},           // hoist in decode
		{5, 4, 5, 0},              // point logits elsewhere
		{6, 0, 50, 131},           // change an integer attribute
		{2, 0, 9, 0, 7, 0, 20, 0}, // drop a slot, swap arguments
	} {
		f.Add(seed)
	}
	header := bytes.SplitAfterN(tiny.plan, []byte("\n"), 3)[1]
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 64 {
			return // 16 edits are plenty; longer inputs only cost time
		}
		p, err := plan.Decode(tiny.plan)
		if err != nil {
			t.Fatal(err)
		}
		strict := true
		for ; len(ops) >= 4; ops = ops[4:] {
			g := p.Module.Graphs[int(ops[0]>>7)]
			i := (int(ops[1])<<8 | int(ops[2])) % len(g.Nodes)
			strict = applyEdit(g, int(ops[0]&7), i, ops[3]) && strict
		}
		body := append(append([]byte(nil), header...), ir.Format(p.Module)...)
		checkMutant(t, append([]byte(plan.FirstLine(body)), body...), strict)
	})
}

// applyEdit applies one edit of FuzzPlanEdits to node i of g and reports
// whether it only moves nodes or changes slots.
func applyEdit(g *ir.Graph, kind, i int, v byte) bool {
	n := g.Nodes[i]
	switch kind {
	case 0: // swap with the next node
		if i+1 < len(g.Nodes) {
			g.Nodes[i], g.Nodes[i+1] = g.Nodes[i+1], g.Nodes[i]
		}
	case 1: // another slot
		n.Attrs["buf"] = int64(v % 32)
	case 2: // no slot
		delete(n.Attrs, "buf")
	case 3: // hoist to just after the last argument
		at := 0
		for j := range i {
			for _, a := range n.Args {
				if g.Nodes[j] == a {
					at = j + 1
				}
			}
		}
		move(g, i, at)
	case 4: // sink to just before the first reader
		at := len(g.Nodes) - 1
		for j := len(g.Nodes) - 1; j > i; j-- {
			for _, a := range g.Nodes[j].Args {
				if a == n {
					at = j - 1
				}
			}
		}
		move(g, i, at)
	case 5: // point the output elsewhere
		g.Outputs[0].Node = n
		return false
	case 6: // change the first integer attribute
		for _, k := range n.Attrs.Keys() {
			if x, ok := n.Attrs[k].(int64); ok && k != "buf" {
				n.Attrs[k] = x + int64(v) - 128
				break
			}
		}
		return false
	case 7: // swap the first two arguments
		if len(n.Args) >= 2 {
			n.Args[0], n.Args[1] = n.Args[1], n.Args[0]
		}
		return false
	}
	g.Renumber()
	return true
}

// move places node i at position at, shifting the nodes between.
func move(g *ir.Graph, i, at int) {
	n := g.Nodes[i]
	nodes := append(g.Nodes[:i:i], g.Nodes[i+1:]...)
	g.Nodes = append(nodes[:at:at], append([]*ir.Node{n}, nodes[at:]...)...)
}
