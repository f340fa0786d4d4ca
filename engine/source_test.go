package engine_test

import (
	"path/filepath"
	"slices"
	"testing"

	_ "github.com/ds4go/ds4/backends/cpu"
	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/models/deepseekv4"
	"github.com/ds4go/ds4/models/deepseekv4/dstest"
	"github.com/ds4go/ds4/synth"
)

// A model opened on a synth.Source runs the weights of the checkpoint
// synth.Write makes with the same seed: the same logits, bit for bit.
func TestOpenSourceIsTheWrittenCheckpoint(t *testing.T) {
	c, err := deepseekv4.LoadConfig(dstest.TinyDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "ck")
	if err := synth.Write(dir, c, 3, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	src, err := synth.NewSource(c, 3, synth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run := func(md *engine.Model, err error) [][]float32 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer md.Close()
		s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: 8, MaxMemory: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		lg, err := s.Prefill([][]int64{{1, 5, 9, 2}})
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{slices.Clone(lg.Last()[0])}
		if lg, err = s.Decode([]int64{7}); err != nil {
			t.Fatal(err)
		}
		return append(out, slices.Clone(lg.Last()[0]))
	}
	for _, be := range []string{"cpu-ref", "cpu"} {
		want := run(engine.Open(dstest.BuildTiny(t), dir, be))
		got := run(engine.OpenSource(dstest.BuildTiny(t), src, be))
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: call %d: logits on the source differ from the written checkpoint's", be, i)
			}
		}
	}
	if b, _ := src.Generated(); b == 0 {
		t.Error("the source generated nothing")
	}
}
