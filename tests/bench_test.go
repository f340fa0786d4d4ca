package tests

import (
	"fmt"
	"testing"

	"github.com/ds4go/ds4/engine"
	"github.com/ds4go/ds4/ir"
	"github.com/ds4go/ds4/passes"
)

// BenchmarkTinyDecode measures CPU decode steps per second on the tiny
// checkpoint with the pass pipeline off (only the required passes) and on:
//
//	go test ./tests -run XXX -bench TinyDecode -benchtime 200x
func BenchmarkTinyDecode(b *testing.B) {
	for _, mode := range []string{"none", "default"} {
		b.Run("passes="+mode, func(b *testing.B) {
			m := buildTiny(b)
			if _, err := passes.Run(m, passes.ParseNames(mode), passes.Options{}); err != nil {
				b.Fatal(err)
			}
			benchDecode(b, m)
		})
	}
}

func benchDecode(b *testing.B, m *ir.Module) {
	model, err := engine.Open(m, tinyDir(), "cpu")
	if err != nil {
		b.Fatal(err)
	}
	defer model.Close()
	const batch, prompt = 1, 8
	maxLen := prompt + b.N + 1
	s, err := model.NewSession(engine.Options{Batch: batch, MaxLen: maxLen, MaxMemory: -1})
	if err != nil {
		b.Fatal(err)
	}
	row := make([]int64, prompt)
	for i := range row {
		row[i] = int64(3 + i)
	}
	if _, err := s.Prefill([][]int64{row}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Decode([]int64{int64(5 + i%100)}); err != nil {
			b.Fatal(fmt.Errorf("decode %d: %w", i, err))
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tokens/s")
}
