package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/ds4go/ds4/backends/cpu/fast"
)

// TestGenerateIsTheLoop: Generate's greedy ids are the argmax of a
// hand-written prefill + decode loop, its logits callback sees every call,
// and teacher forcing feeds the given column instead of the sample.
func TestGenerateIsTheLoop(t *testing.T) {
	md := openTiny(t)
	prompt := [][]int64{{1, 2, 3}, {4, 5, 6}}
	s, err := md.NewSession(Options{Batch: 2, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	g, err := s.Generate(prompt, GenerateOptions{MaxNew: 4, Logits: func(call string, _ *Logits) { calls = append(calls, call) }})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls, []string{"prefill", "decode00", "decode01", "decode02"}) || g.DecodeSteps != 3 {
		t.Errorf("calls %v, %d decode steps", calls, g.DecodeSteps)
	}
	h, err := md.NewSession(Options{Batch: 2, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	lg, err := h.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]int64, 2)
	for range 4 {
		next := Sampling{}.Sample(lg.Last(), nil)
		for b := range want {
			want[b] = append(want[b], next[b])
		}
		if len(want[0]) == 4 {
			break
		}
		if lg, err = h.Decode(next); err != nil {
			t.Fatal(err)
		}
	}
	for b := range want {
		if !slices.Equal(g.IDs[b], want[b]) {
			t.Errorf("row %d: Generate %v, the loop %v", b, g.IDs[b], want[b])
		}
	}
	// Forced decode inputs: the samples are returned, the column is fed.
	f, err := md.NewSession(Options{Batch: 2, MaxLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	forced := [][]int64{{7, 7, 7}, {8, 8, 8}}
	if _, err := f.Generate(prompt, GenerateOptions{MaxNew: 4, Forced: forced}); err != nil {
		t.Fatal(err)
	}
	if f.Pos != 3+3 {
		t.Errorf("forced run at position %d, want 6", f.Pos)
	}
}

// TestSampleTemperature: at a temperature the sampler follows the
// distribution (a logit 5 above the others wins nearly always) and is
// deterministic in the seed.
func TestSampleTemperature(t *testing.T) {
	row := []float32{0, 5, 0, 0}
	wins := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if (Sampling{Temperature: 1}).Sample([][]float32{row}, rng)[0] == 1 {
			wins++
		}
	}
	// P(win) = e^5 / (e^5 + 3) ≈ 0.980: 1000 draws give 980 ± 13 (3 sigma).
	if wins < 940 || wins > 1000 {
		t.Errorf("the likely id won %d of 1000 draws, want about 980", wins)
	}
	a := (Sampling{Temperature: 0.7}).Sample([][]float32{{1, 2, 3}}, rand.New(rand.NewPCG(9, 9)))
	b := (Sampling{Temperature: 0.7}).Sample([][]float32{{1, 2, 3}}, rand.New(rand.NewPCG(9, 9)))
	if a[0] != b[0] {
		t.Errorf("same seed, ids %d and %d", a[0], b[0])
	}
}

// TestCPUBackendsConcurrently: the reference and the fast kernels are two
// backends, not a process-wide switch, so a cpu-ref model and a cpu model
// run at the same time and each gives its own sequential result bit for
// bit.
func TestCPUBackendsConcurrently(t *testing.T) {
	fastM := openTiny(t)
	refM, err := Open(fastM.Module, fastM.Dir, "cpu-ref")
	if err != nil {
		t.Fatal(err)
	}
	defer refM.Close()
	prompt := [][]int64{{3, 1, 4, 1, 5, 9, 2, 6}}
	run := func(m *Model) []float32 {
		s, err := m.NewSession(Options{Batch: 1, MaxLen: 8})
		if err != nil {
			t.Error(err)
			return nil
		}
		defer s.Close()
		lg, err := s.Prefill(prompt)
		if err != nil {
			t.Error(err)
			return nil
		}
		return slices.Clone(lg.Data)
	}
	wantFast, wantRef := run(fastM), run(refM)
	var gotFast, gotRef []float32
	done := make(chan bool)
	go func() { gotFast = run(fastM); done <- true }()
	gotRef = run(refM)
	<-done
	if !slices.Equal(gotFast, wantFast) || !slices.Equal(gotRef, wantRef) {
		t.Errorf("concurrent runs differ from the sequential ones")
	}
}

// TestSampleTopKTopP: top-k 1 and a tiny top-p are greedy at any
// temperature; a draw never leaves the top k; top-p keeps the fewest
// likely ids whose mass reaches p (two equal ids of 0.45 each and a tail:
// p = 0.5 keeps both, never the tail).
func TestSampleTopKTopP(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	row := []float32{0.5, 2, -1, 1.9, 0, 1.8, -3, 0.1}
	for range 200 {
		if id := (Sampling{Temperature: 5, TopK: 1}).Sample([][]float32{row}, rng)[0]; id != 1 {
			t.Fatalf("top-k 1 drew %d, want the argmax 1", id)
		}
		if id := (Sampling{Temperature: 5, TopP: 1e-9}).Sample([][]float32{row}, rng)[0]; id != 1 {
			t.Fatalf("top-p 1e-9 drew %d, want the argmax 1", id)
		}
	}
	seen := map[int64]int{}
	for range 2000 {
		seen[(Sampling{Temperature: 100, TopK: 3}).Sample([][]float32{row}, rng)[0]]++
	}
	// At T = 100 the three kept ids are nearly uniform: each ≈ 667 of 2000.
	if len(seen) != 3 || seen[1] < 500 || seen[3] < 500 || seen[5] < 500 {
		t.Errorf("top-k 3 at T 100 drew %v, want ids 1, 3, 5 about 667 times each", seen)
	}
	// ln(0.05/0.45) = -2.197: ids 0 and 1 hold 0.45 each, ids 2 and 3 0.05.
	tail := float32(-2.1972246)
	two := []float32{0, 0, tail, tail}
	seen = map[int64]int{}
	for range 2000 {
		seen[(Sampling{Temperature: 1, TopP: 0.5}).Sample([][]float32{two}, rng)[0]]++
	}
	if seen[2]+seen[3] != 0 || seen[0] < 850 || seen[1] < 850 {
		t.Errorf("top-p 0.5 drew %v, want ids 0 and 1 about 1000 times each and never 2 or 3", seen)
	}
	seen = map[int64]int{}
	for range 2000 {
		seen[(Sampling{Temperature: 1, TopP: 0.93}).Sample([][]float32{two}, rng)[0]]++
	}
	// 0.93 needs one tail id too (0.90 < 0.93 ≤ 0.95): three ids kept, never all four.
	if len(seen) != 3 {
		t.Errorf("top-p 0.93 drew %v, want exactly three ids", seen)
	}
}

// feedTol bounds the logit difference of TestFeedContinues: the decode and
// prefill kernels sum in different orders; measured 9.5e-7 on the tiny
// model (cpu backend, portable and AVX2 kernels), bounded at about 10x that.
// At AVX-512 the 16-lane f32 dot of the decode path (dotF32AVX512; with the
// AVX2 dot in its place the difference is 9.5e-7 again) moves the logits by
// 1.5e-3 (rel-L2 1.7e-4) on a 2-core Zen 5 EPYC: within the golden logits
// tolerance (feedRelL2), far above the other levels; issue 18's AVX-512
// kernels are to bring it down. Until then that level is held to feedRelL2.
const (
	feedTol   = 1e-5
	feedRelL2 = 1e-3
)

// TestFeedContinues: a session fed a prompt in two parts (the prefill,
// then decode calls) has the logits of the prompt fed whole, within the
// decode-vs-one-call difference, and the same greedy continuation.
func TestFeedContinues(t *testing.T) {
	md := openTiny(t)
	whole := []int64{5, 9, 2, 6, 5, 3, 5, 8}
	run := func(parts ...[]int64) ([]float32, []int64) {
		s, err := md.NewSession(Options{Batch: 1, MaxLen: 16})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var lg *Logits
		for _, p := range parts {
			if lg, err = s.Feed([][]int64{p}); err != nil {
				t.Fatal(err)
			}
		}
		last := slices.Clone(lg.Last()[0])
		g, err := s.Generate([][]int64{{1}}, GenerateOptions{MaxNew: 3})
		if err != nil {
			t.Fatal(err)
		}
		if s.Pos != len(whole)+1+2 {
			t.Errorf("session at %d after the continuation, want %d", s.Pos, len(whole)+3)
		}
		return last, g.IDs[0]
	}
	a, ga := run(whole)
	b, gb := run(whole[:5], whole[5:])
	var worst float64
	for i := range a {
		worst = max(worst, math.Abs(float64(a[i]-b[i])))
	}
	var num, den float64
	for i := range a {
		num += float64(a[i]-b[i]) * float64(a[i]-b[i])
		den += float64(a[i]) * float64(a[i])
	}
	rel := math.Sqrt(num / den)
	t.Logf("max |logit difference| %.3g, rel-L2 %.3g (kernels %v)", worst, rel, fast.CurrentLevel())
	if fast.CurrentLevel() < fast.AVX512 && worst > feedTol {
		t.Errorf("logits differ by %.3g, want ≤ %g", worst, feedTol)
	}
	if rel > feedRelL2 {
		t.Errorf("logits differ by rel-L2 %.3g, want ≤ %g", rel, feedRelL2)
	}
	if !slices.Equal(ga, gb) {
		t.Errorf("greedy continuations %v and %v", ga, gb)
	}
}

// TestCandidatesAreTheStableSort: top-k by a heap and top-p by a sort keep
// the ids, in the order, of a stable sort of the row by logit (ties, many
// of them here, to the lower id).
func TestCandidatesAreTheStableSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		l := make([]float32, 1+rng.IntN(300))
		for i := range l {
			l[i] = float32(rng.IntN(20)) / 4 // few distinct values: many ties
		}
		sp := Sampling{Temperature: 0.5 + rng.Float64(), TopK: rng.IntN(len(l) + 2), TopP: []float64{0, 0.3, 0.9, 1}[trial%4]}
		want := stableCandidates(sp, l)
		if got := sp.candidates(l); !slices.Equal(got, want) {
			t.Fatalf("%+v on %v: candidates %v, want %v", sp, l, got, want)
		}
	}
}

// stableCandidates is candidates by a stable sort of the whole row.
func stableCandidates(sp Sampling, l []float32) []int {
	ids := make([]int, len(l))
	for i := range ids {
		ids[i] = i
	}
	cutP := sp.TopP > 0 && sp.TopP < 1
	if (sp.TopK <= 0 || sp.TopK >= len(l)) && !cutP {
		return ids
	}
	sort.SliceStable(ids, func(a, b int) bool { return l[ids[a]] > l[ids[b]] })
	if sp.TopK > 0 && sp.TopK < len(ids) {
		ids = ids[:sp.TopK]
	}
	if !cutP {
		return ids
	}
	return sp.topP(l, ids)
}

func BenchmarkCandidatesTopK(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	l := make([]float32, 129280)
	for i := range l {
		l[i] = float32(rng.NormFloat64() * 3)
	}
	sp := Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95}
	for b.Loop() {
		sp.candidates(l)
	}
}
