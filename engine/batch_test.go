package engine

import (
	"maps"
	"runtime"

	"github.com/ds4go/ds4/backends"
	"github.com/ds4go/ds4/ir"
	"slices"
	"strings"
	"testing"

	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/passes"
)

// lone runs prompt alone in a fresh B=1 session and feeds the greedy
// tokens for steps decode steps: the logits of every call.
func lone(t testing.TB, md *Model, prompt []int64, steps int) [][]float32 {
	t.Helper()
	s, err := md.NewSession(Options{Batch: 1, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lg, err := s.Prefill([][]int64{prompt})
	if err != nil {
		t.Fatal(err)
	}
	out := [][]float32{slices.Clone(lg.Last()[0])}
	for range steps {
		next := Sampling{}.Sample(lg.Last(), nil)
		if lg, err = s.Decode(next); err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Clone(lg.Last()[0]))
	}
	return out
}

func openTinyOn(t testing.TB, backend string) *Model { return openTinyPlan(t, backend, false) }

// openTinyPlan opens the tiny checkpoint on backend, its module run through
// the default pass pipeline first when planned (fusions, the activation
// arena's buffer slots: what a compiled plan file holds).
func openTinyPlan(t testing.TB, backend string, planned bool) *Model {
	t.Helper()
	m := dstest.BuildTiny(t)
	if planned {
		if _, err := passes.Run(m, nil, passes.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	md, err := Open(m, dstest.TinyDir(), backend)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(md.Close)
	return md
}

// TestBatchEqualsLoneSessions: 4 slots, prompts of different lengths
// prefilled at different times, greedy steps interleaved (a slot joining
// mid-way, one freed and reused, steps of slots not in row order): every
// slot's logits are bit-identical to a lone session's, on cpu-ref and cpu,
// with the default passes (fused ops, arena slots), and with a session per
// slot (the path of backends without row views).
func TestBatchEqualsLoneSessions(t *testing.T) {
	prompts := [][]int64{{1, 2, 3}, {4, 5, 6, 7, 8}, {9}, {10, 11, 12, 13, 14, 15, 16}, {17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29}}
	const steps = 6
	for _, be := range []string{"cpu-ref", "cpu", "cpu/lone", "cpu/planned", "cpu-ref/planned"} {
		t.Run(be, func(t *testing.T) {
			name, alone := strings.CutSuffix(be, "/lone") // alone: a session per slot, as on cuda
			name, planned := strings.CutSuffix(name, "/planned")
			md := openTinyPlan(t, name, planned)
			want := make([][][]float32, len(prompts))
			for i, p := range prompts {
				want[i] = lone(t, md, p, steps)
			}
			b, err := md.newBatch(BatchOptions{Slots: 4, MaxLen: 32}, !alone)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if b.Ragged() == alone {
				t.Fatalf("Ragged() %v", b.Ragged())
			}
			req := map[int]int{} // slot → prompt index
			got := map[int]int{} // slot → calls checked
			last := map[int][]float32{}
			check := func(slot int, lg []float32) {
				t.Helper()
				p := req[slot]
				if !slices.Equal(lg, want[p][got[slot]]) {
					t.Fatalf("slot %d (prompt %d) call %d: logits differ from a lone session", slot, p, got[slot])
				}
				got[slot]++
				last[slot] = slices.Clone(lg)
			}
			prefill := func(slot, p int) {
				t.Helper()
				req[slot], got[slot] = p, 0
				lg, err := b.Prefill(slot, prompts[p])
				if err != nil {
					t.Fatal(err)
				}
				check(slot, lg)
			}
			step := func(slots ...int) {
				t.Helper()
				var toks []int64
				for _, sl := range slots {
					toks = append(toks, Sampling{}.Sample([][]float32{last[sl]}, nil)[0])
				}
				lgs, err := b.Step(slots, toks)
				if err != nil {
					t.Fatal(err)
				}
				for i, sl := range slots {
					check(sl, lgs[i])
				}
			}
			prefill(0, 0)
			prefill(2, 1)
			step(0, 2)
			step(2)
			prefill(1, 2) // joins mid-way
			step(2, 0, 1)
			step(0, 1, 2)
			prefill(3, 3)
			step(0, 1, 2, 3)
			b.Free(2)
			prefill(2, 4) // reused
			step(3, 2, 1, 0)
			step(0, 1, 2, 3)
			step(1, 3)
			if b.Pos(2) != len(prompts[4])+2 || b.Pos(1) != 1+6 {
				t.Errorf("positions %d %d", b.Pos(2), b.Pos(1))
			}
		})
	}
}

// TestBatchWideStepEqualsLoneSessions: 16 slots prefilled side by side
// (PrefillMany) and ragged steps of all 16 (more rows than the fast
// matmuls stream by default, run as row groups side by side) give every
// slot the logits of its lone session, bit for bit, on cpu and cpu-ref:
// the decode call's matmuls compute each row as a one-row call does.
func TestBatchWideStepEqualsLoneSessions(t *testing.T) {
	const slots, steps = 16, 3
	for _, be := range []string{"cpu", "cpu-ref"} {
		t.Run(be, func(t *testing.T) {
			md := openTinyPlan(t, be, true)
			b, err := md.NewBatch(BatchOptions{Slots: slots, MaxLen: 32})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			want := make([][][]float32, slots)
			all := make([]int, slots)
			prompts := make([][]int64, slots)
			for s := range slots {
				p := make([]int64, 1+s%6)
				for i := range p {
					p[i] = int64(1 + (3*s+i)%50)
				}
				want[s] = lone(t, md, p, steps)
				all[s], prompts[s] = s, p
			}
			last, errs := b.PrefillMany(all, prompts)
			for s := range slots {
				if errs[s] != nil {
					t.Fatal(errs[s])
				}
				if !slices.Equal(last[s], want[s][0]) || b.Pos(s) != len(prompts[s]) {
					t.Fatalf("slot %d: the prefill's logits differ from a lone session's (at %d)", s, b.Pos(s))
				}
			}
			for st := 1; st <= steps; st++ {
				toks := make([]int64, slots)
				for s := range slots {
					toks[s] = Sampling{}.Sample([][]float32{last[s]}, nil)[0]
				}
				lgs, err := b.Step(all, toks)
				if err != nil {
					t.Fatal(err)
				}
				for s := range slots {
					if !slices.Equal(lgs[s], want[s][st]) {
						t.Fatalf("step %d slot %d: logits differ from a lone session", st, s)
					}
					last[s] = lgs[s]
				}
			}
		})
	}
}

// TestStepPrefillEqualsLoneSessions: slots joining a running batch through
// StepPrefill (their prefills beside the step of the others, 1 to 3 at a
// time, on 2 cores) and the slots stepped meanwhile give a lone session's
// logits bit for bit; a prefill of a slot the call steps is refused and
// leaves that slot's stream unchanged.
func TestStepPrefillEqualsLoneSessions(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const slots, steps = 8, 6
	md := openTinyPlan(t, "cpu", true)
	b, err := md.NewBatch(BatchOptions{Slots: slots, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	want := make([][][]float32, slots)
	prompts := make([][]int64, slots)
	for s := range slots {
		p := make([]int64, 2+(5*s)%7)
		for i := range p {
			p[i] = int64(1 + (7*s+i)%50)
		}
		prompts[s], want[s] = p, lone(t, md, p, steps)
	}
	// slot 0 first; then slots join 1, 2, 3 at a time beside the steps
	last := make([][]float32, slots)
	done := make([]int, slots) // steps taken
	lg, err := b.Prefill(0, prompts[0])
	if err != nil {
		t.Fatal(err)
	}
	last[0] = lg
	active := []int{0}
	next := 1
	for round := 1; len(active) > 0; round++ {
		var join []int
		for range min(round, slots-next) {
			join = append(join, next)
			next++
		}
		var run []int
		var toks []int64
		for _, s := range active {
			if done[s] < steps {
				run = append(run, s)
				toks = append(toks, Sampling{}.Sample([][]float32{last[s]}, nil)[0])
			}
		}
		if len(run) == 0 && len(join) == 0 {
			break
		}
		jp := make([][]int64, len(join))
		for i, s := range join {
			jp[i] = prompts[s]
		}
		if len(run) > 0 && round == 2 { // a prefill of a slot being stepped is refused
			_, _, perrs, err := b.StepPrefill(run[:1], toks[:1], run[:1], [][]int64{{1, 2}})
			if err != nil || perrs[0] == nil {
				t.Fatalf("a prefill of a stepped slot: step error %v, prefill error %v", err, perrs[0])
			}
			s := run[0]
			done[s]++
			// (the step above was a real step of slot s)
			if done[s] > steps {
				t.Fatal("test setup: too many steps")
			}
			run, toks = run[1:], toks[1:]
			// its logits were not kept: take them from the lone session
			last[s] = want[s][done[s]]
		}
		var lgs [][]float32
		var perrs []error
		var plg [][]float32
		if len(run) > 0 {
			lgs, plg, perrs, err = b.StepPrefill(run, toks, join, jp)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			plg, perrs = b.PrefillMany(join, jp)
		}
		for i, s := range run {
			done[s]++
			if !slices.Equal(lgs[i], want[s][done[s]]) {
				t.Fatalf("round %d: slot %d step %d: logits differ from a lone session's", round, s, done[s])
			}
			last[s] = lgs[i]
		}
		for i, s := range join {
			if perrs[i] != nil {
				t.Fatal(perrs[i])
			}
			if !slices.Equal(plg[i], want[s][0]) || b.Pos(s) != len(prompts[s]) {
				t.Fatalf("round %d: slot %d's prefill beside the step differs from a lone session's", round, s)
			}
			last[s] = plg[i]
			active = append(active, s)
		}
	}
	for s := range slots {
		if done[s] != steps {
			t.Errorf("slot %d took %d steps, want %d", s, done[s], steps)
		}
	}
}

// TestBatchUniformStep: a Step of every slot at one position is the plain
// decode call, equal to a session's Decode; the logits returned are the
// caller's (not the arena's); bad steps are refused.
func TestBatchUniformStep(t *testing.T) {
	md := openTinyOn(t, "cpu")
	prompt := []int64{3, 1, 4}
	want := lone(t, md, prompt, 1)
	b, err := md.NewBatch(BatchOptions{Slots: 2, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var first []float32
	for slot, p := range [][]int64{prompt, {2, 7, 1}} {
		lg, err := b.Prefill(slot, p)
		if err != nil {
			t.Fatal(err)
		}
		if slot == 0 {
			first = lg
		}
	}
	tok := Sampling{}.Sample([][]float32{want[0]}, nil)[0]
	lgs, err := b.Step([]int{0, 1}, []int64{tok, 5})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, want[0]) { // the returned logits are the caller's
		t.Error("a later call changed the logits Prefill returned")
	}
	if !slices.Equal(lgs[0], want[1]) {
		t.Error("slot 0 differs from the session's decode")
	}
	for _, bad := range []struct {
		slots []int
		toks  []int64
	}{{[]int{0}, []int64{int64(md.Vocab)}}, {[]int{0, 0}, []int64{1, 1}}, {[]int{5}, []int64{1}}, {nil, nil}} {
		if _, err := b.Step(bad.slots, bad.toks); err == nil {
			t.Errorf("step %v %v was accepted", bad.slots, bad.toks)
		}
	}
	b.Free(1)
	if _, err := b.Step([]int{1}, []int64{1}); err == nil {
		t.Error("a step of a freed slot was accepted")
	}
}

// TestRowWiseTinyDecode: the per-row nodes of the tiny decode graph are
// those derived by reading the ops. Without row positions (a backend that
// does not register them): the position-dependent ops (caches, window,
// compressor, indexer, candidate blocks, Engram history and hash, the
// positions, the states, start_pos), the concats of window and compressed
// rows (P-sized), and of the otherwise batched ops only those on the
// compressor's new rows ((P+1)/r-P/r of them: one cast, one matmul, two
// rmsnorms, two fp4_quants, two ropes), the probes of per-row values, the
// weights only per-row ops read, and the sparse attentions of the
// compressed layers (their key rows are P-sized); the ropes of the tokens
// are batched: they take every row's positions ([B, S], stacked). With the
// cpu backends' row positions, start_pos is i64[B] and the window rings
// and indices, the Engram history and hash and the tokens' positions run
// once for all rows too: what is left per row is P-sized (caches,
// compressor pool, indexer, compressed attention).
func TestRowWiseTinyDecode(t *testing.T) {
	md := openTinyOn(t, "cpu")
	count := func(rw map[*ir.Node]bool) map[string]int {
		got := map[string]int{}
		for _, n := range md.Placement.Graph.Nodes {
			if rw[n] {
				got[n.Op]++
			}
		}
		return got
	}
	old := backends.RowWise(md.Placement.Graph, nil)
	want := map[string]int{"cache_read": 9, "cache_write": 4, "candidate_blocks": 1, "cast": 1, "compressor_pool": 1, "concat": 6,
		"engram_hash": 2, "engram_hist_update": 1, "fp4_quant": 2, "group_state_update": 2, "index_mask": 3, "index_score": 3, "index_topk": 3,
		"input": 1, "mask_fill": 1, "matmul": 1, "positions": 3, "probe": 11, "rmsnorm": 2, "rope": 2, "sparse_attn": 6,
		"state": 15, "weight": 9, "window_idx": 8, "window_update": 8}
	if got := count(old); !maps.Equal(got, want) {
		t.Errorf("per-row ops without row positions %v\nwant %v", got, want)
	}
	rw := backends.RowWise(md.Placement.Graph, backends.RowPositions(md.Placement))
	want = map[string]int{"cache_read": 9, "cache_write": 4, "candidate_blocks": 1, "cast": 1, "compressor_pool": 1, "concat": 6,
		"fp4_quant": 2, "group_state_update": 2, "index_mask": 3, "index_score": 3, "index_topk": 3,
		"mask_fill": 1, "matmul": 1, "positions": 1, "probe": 11, "rmsnorm": 2, "rope": 2, "sparse_attn": 6,
		"state": 6, "weight": 9}
	if got := count(rw); !maps.Equal(got, want) {
		t.Errorf("per-row ops %v\nwant %v", got, want)
	}
	for _, n := range md.Placement.Graph.Nodes {
		switch n.Op {
		case "embed", "grouped_matmul", "expert_matmul", "hc_pre", "hc_post", "moe_combine", "matmul_fp8", "engram_lookup", "engram_gate",
			"window_update", "window_idx", "engram_hash", "engram_hist_update":
			if rw[n] {
				t.Errorf("%%%d (%s) is per-row", n.ID, n.Op)
			}
		case "input":
			if rw[n] || old[n] != (n.Attrs.Str("name", "") == "start_pos") {
				t.Errorf("input %q per-row %v (%v without row positions)", n.Attrs.Str("name", ""), rw[n], old[n])
			}
		}
	}
}

// TestRaggedCutTiny: the ragged cut of tiny's planned decode graph on cpu
// has 29 segments, 9 of them per row (62 and 36 when each op ran on the
// backend of its placement and the window, Engram and positions ops once
// per row): the portable ops (cpu's RegisterPortable: caches, compressor,
// indexer selection, window, Engram history and hash, probes) join the run
// of the node before them, so that no per-row run is cut between cpu and
// cpu-ref.
func TestRaggedCutTiny(t *testing.T) {
	md := openTinyPlan(t, "cpu", true)
	segs, rw, err := md.decode.RowSegments()
	if err != nil {
		t.Fatal(err)
	}
	per := 0
	for i, seg := range segs {
		if rw[i] {
			per++
			if seg.Backend != "cpu" {
				t.Errorf("per-row segment %d (%%%d %s) on %s", i, seg.Nodes[0].ID, seg.Nodes[0].Op, seg.Backend)
			}
		}
	}
	if len(segs) != 29 || per != 9 {
		t.Errorf("%d segments, %d per row; want 29, 9", len(segs), per)
	}
}

// benchSlots prefills slots slots with prompts of 1..slots tokens (every
// slot at its own position).
func benchSlots(b *testing.B, md *Model, slots int) *Batch {
	bt, err := md.NewBatch(BatchOptions{Slots: slots, MaxLen: 256})
	if err != nil {
		b.Fatal(err)
	}
	for s := range slots {
		p := make([]int64, s+1)
		for i := range p {
			p[i] = int64(1 + (s+i)%50)
		}
		if _, err := bt.Prefill(s, p); err != nil {
			b.Fatal(err)
		}
	}
	return bt
}

// BenchmarkBatchStep16: one decode step of 16 slots at 16 positions on the
// tiny model (cpu); tokens/s counts every slot's token.
func BenchmarkBatchStep16(b *testing.B) {
	md := openTinyPlan(b, "cpu", true)
	bt := benchSlots(b, md, 16)
	defer bt.Close()
	slots := make([]int, 16)
	toks := make([]int64, 16)
	for i := range slots {
		slots[i], toks[i] = i, int64(i+1)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if bt.Pos(15)+1 >= 256 {
			b.StopTimer()
			bt.Close()
			bt = benchSlots(b, md, 16)
			b.StartTimer()
		}
		if _, err := bt.Step(slots, toks); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkBatchPrefillMany2: two 25-token prompts prefilled side by side
// (PrefillMany, one per core, as serve admits a burst) on the tiny model
// (cpu); tokens/s counts the prompts' tokens.
func BenchmarkBatchPrefillMany2(b *testing.B) {
	md := openTinyPlan(b, "cpu", true)
	bt, err := md.NewBatch(BatchOptions{Slots: 2, MaxLen: 64})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	prompts := make([][]int64, 2)
	for s := range prompts {
		for i := range 25 {
			prompts[s] = append(prompts[s], int64(1+(3*i+7*s)%50))
		}
	}
	for b.Loop() {
		_, errs := bt.PrefillMany([]int{0, 1}, prompts)
		for i, err := range errs {
			if err != nil {
				b.Fatalf("slot %d: %v", i, err)
			}
		}
	}
	b.ReportMetric(float64(50*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkSessionDecode1: one decode step of a lone B=1 session (the
// single-stream baseline of BenchmarkBatchStep16).
func BenchmarkSessionDecode1(b *testing.B) {
	md := openTinyPlan(b, "cpu", true)
	var s *Session
	start := func() {
		var err error
		if s, err = md.NewSession(Options{Batch: 1, MaxLen: 256}); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Prefill([][]int64{{1, 2, 3, 4, 5, 6, 7, 8}}); err != nil {
			b.Fatal(err)
		}
	}
	start()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.Pos+1 >= 256 {
			b.StopTimer()
			s.Close()
			start()
			b.StartTimer()
		}
		if _, err := s.Decode([]int64{3}); err != nil {
			b.Fatal(err)
		}
	}
	s.Close()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// TestBatchAfterFailedStep: a ragged call that fails inside a per-row
// segment (a state missing from a row's views) returns the error, and the
// batch's next steps are still those of lone sessions.
func TestBatchAfterFailedStep(t *testing.T) {
	md := openTinyPlan(t, "cpu", true)
	prompts := [][]int64{{1, 2, 3}, {4, 5, 6, 7, 8}}
	want := [][][]float32{lone(t, md, prompts[0], 1), lone(t, md, prompts[1], 1)}
	b, err := md.NewBatch(BatchOptions{Slots: 2, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for i, p := range prompts {
		if _, err := b.Prefill(i, p); err != nil {
			t.Fatal(err)
		}
	}
	broken := map[string]backends.Buffer{}
	c := &backends.Call{B: 2, S: 1, M: 32, Weight: md.weight, Rope: b.s.rope, State: b.s.state, RowPos: []int{3, 5},
		RowState: []map[string]backends.Buffer{b.views[0], broken},
		Inputs:   map[string]*backends.Tensor{"tokens": {DType: ir.I64, Shape: []int{2, 1}, I64: []int64{1, 1}}, "start_pos": {DType: ir.I64, Shape: []int{}, I64: []int64{3}}}}
	if _, err := md.decode.RunRows(c); err == nil {
		t.Fatal("a ragged call without row 1's state succeeded")
	}
	toks := []int64{Sampling{}.Sample([][]float32{want[0][0]}, nil)[0], Sampling{}.Sample([][]float32{want[1][0]}, nil)[0]}
	lgs, err := b.Step([]int{0, 1}, toks)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lgs {
		if !slices.Equal(lgs[i], want[i][1]) {
			t.Errorf("slot %d after a failed call: logits differ from a lone session", i)
		}
	}
}
