package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
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
		next := Sample(lg.Last(), 0, nil)
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
		if Sample([][]float32{row}, 1, rng)[0] == 1 {
			wins++
		}
	}
	// P(win) = e^5 / (e^5 + 3) ≈ 0.980: 1000 draws give 980 ± 13 (3 sigma).
	if wins < 940 || wins > 1000 {
		t.Errorf("the likely id won %d of 1000 draws, want about 980", wins)
	}
	a := Sample([][]float32{{1, 2, 3}}, 0.7, rand.New(rand.NewPCG(9, 9)))
	b := Sample([][]float32{{1, 2, 3}}, 0.7, rand.New(rand.NewPCG(9, 9)))
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
