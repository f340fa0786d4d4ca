package simtest

import (
	"testing"

	"github.com/ds4go/ds4/engine"
)

// BenchmarkDecodeStepHost is the host's time per tiny decode step (B 1,
// past 11 prompt tokens) on the simulated driver: the launchers and the
// recording, without the driver's own cost (purego calls, the GPU).
func BenchmarkDecodeStepHost(b *testing.B) {
	for _, x := range []struct {
		name   string
		graphs bool
	}{{"graphs", true}, {"plain", false}} {
		b.Run(x.name, func(b *testing.B) {
			md, _ := open(b, "tiny", x.graphs)
			s, err := md.NewSession(engine.Options{Batch: 1, MaxLen: b.N + 40, MaxMemory: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Prefill([][]int64{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := s.Decode([]int64{1}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
