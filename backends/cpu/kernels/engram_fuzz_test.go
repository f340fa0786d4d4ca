package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

// fuzzBytes hands out fuzz bytes as numbers, zeros once they run out.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], f.b)
	f.b = f.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

func (f *fuzzBytes) small(lo, hi int) int { return lo + int(f.u64()%uint64(hi-lo+1)) }

// FuzzEngramHash runs the Engram n-gram hash on random valid constants
// (positive primes, any multipliers, offsets that leave room for the prime)
// and a random history (any ids, dead tokens included): it must not panic and
// every table row must lie in [offset, offset+prime).
func FuzzEngramHash(f *testing.F) {
	f.Add([]byte{}, int64(2))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, int64(-1))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00\x00\x00\x00\x00\x00\x80"), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, data []byte, pad int64) {
		r := &fuzzBytes{b: data}
		nl, ng, heads := r.small(1, 3), r.small(2, 5), r.small(1, 4)
		b, maxLen := r.small(1, 3), r.small(1, 12)
		s := r.small(1, maxLen)
		startPos := r.small(0, maxLen-s)
		cols := (ng - 1) * heads
		mult := make([][]int64, nl)
		primes := make([][][]int64, nl)
		offs := make([][]int64, nl)
		for l := range nl {
			mult[l] = make([]int64, ng)
			for i := range mult[l] {
				mult[l][i] = int64(r.u64())
			}
			primes[l] = make([][]int64, ng-1)
			offs[l] = make([]int64, cols)
			for i := range primes[l] {
				primes[l][i] = make([]int64, heads)
				for h := range primes[l][i] {
					p := int64(r.u64()&math.MaxInt64) | 1 // positive
					primes[l][i][h] = p
					offs[l][i*heads+h] = int64(r.u64() % uint64(math.MaxInt64-p+1))
				}
			}
		}
		hist := make([]int64, b*maxLen)
		for i := range hist {
			v := int64(r.u64())
			if v%5 == 0 {
				v = EngramDead
			}
			hist[i] = v
		}
		out := make([]int64, b*s*nl*cols)
		EngramHash(out, hist, b, maxLen, s, startPos, mult, primes, offs, pad)
		for i, v := range out {
			c := i % cols
			l := (i / cols) % nl
			p, o := primes[l][c/heads][c%heads], offs[l][c]
			if v < o || v-o >= p {
				t.Fatalf("out[%d] = %d outside [%d, %d+%d)", i, v, o, o, p)
			}
		}
	})
}
