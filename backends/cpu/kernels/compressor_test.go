package kernels

import (
	"math"
	"slices"
	"testing"
)

func TestCompressorPool2Small(t *testing.T) {
	ninf := float32(math.Inf(-1))
	// prefill b=1, s=3, d=1: group 0 = tokens 0,1; token 2 -> state slot 0.
	c := []float32{1, 3, 5}
	z := []float32{0, 0, 7}
	kvs := []float32{0, 0}
	scs := []float32{ninf, ninf}
	out := make([]float32, 1)
	if g := compressorPool2(out, c, z, 1, 3, 1, kvs, scs, 0); g != 1 || out[0] != 2 {
		t.Fatalf("prefill: groups %d out %v", g, out)
	}
	if !slices.Equal(kvs, []float32{5, 0}) || scs[0] != 7 || !math.IsInf(float64(scs[1]), -1) {
		t.Fatalf("state %v %v", kvs, scs)
	}
	// decode at position 3 completes the group {2, 3}.
	if g := compressorPool2(out, []float32{9}, []float32{7}, 1, 1, 1, kvs, scs, 3); g != 1 || out[0] != 7 {
		t.Fatalf("decode: groups %d out %v", g, out)
	}
	// decode at position 4 only fills slot 0.
	out[0] = -1
	if g := compressorPool2(out, []float32{2}, []float32{1}, 1, 1, 1, kvs, scs, 4); g != 0 || out[0] != -1 || kvs[0] != 2 {
		t.Fatalf("decode slot 0: groups %d out %v state %v", g, out, kvs)
	}
	// Different scores: weights e/(1+e) computed in fp32.
	compressorPool2(out, []float32{4}, []float32{0}, 1, 1, 1, kvs, scs, 5)
	e := float32(math.Exp(-1))
	if want := float32(2*(1/(1+e))) + float32(4*(e/(1+e))); out[0] != want {
		t.Fatalf("pool = %v, want %v", out[0], want)
	}
}

func compressorPool2(out, c, z []float32, b, s, d int, kvState, scoreState []float32, startPos int) int {
	return CompressorPool(out, c, z, b, s, d, 2, kvState, scoreState, startPos)
}

// TestCompressorPoolKeepsNegativeZero: a group whose products are all −0
// pools to −0, as the reference's sum of the products does.
func TestCompressorPoolKeepsNegativeZero(t *testing.T) {
	for _, r := range []int{2, 3} {
		c := make([]float32, r)
		z := make([]float32, r)
		for i := range c {
			c[i] = float32(math.Copysign(0, -1))
		}
		out := []float32{1}
		CompressorPool(out, c, z, 1, r, 1, r, make([]float32, r), make([]float32, r), 0)
		if out[0] != 0 || !math.Signbit(float64(out[0])) {
			t.Errorf("ratio %d: pooled %v, want -0", r, out[0])
		}
	}
}

// TestCompressorPoolChunkSplits checks that pooling a prompt in chunks of
// any size (CompressorPoolChunk reading the state GroupStateChunk left)
// gives the groups one prefill CompressorPool gives, bit for bit, and the
// same pending tail in the state.
func TestCompressorPoolChunkSplits(t *testing.T) {
	const b, s, d = 2, 23, 5
	c, z := make([]float32, b*s*d), make([]float32, b*s*d)
	for i := range c {
		c[i] = float32(math.Sin(float64(i)*1.3)) * 3
		z[i] = float32(math.Cos(float64(i)*0.7)) * 2
	}
	rows := func(x []float32, p0, n int) []float32 { // positions p0.. of every batch row
		out := make([]float32, 0, b*n*d)
		for bi := range b {
			out = append(out, x[(bi*s+p0)*d:(bi*s+p0+n)*d]...)
		}
		return out
	}
	for _, ratio := range []int{2, 4} {
		fresh := func() (kv, sc []float32) {
			kv, sc = make([]float32, b*ratio*d), make([]float32, b*ratio*d)
			for i := range sc {
				sc[i] = float32(math.Inf(-1))
			}
			return kv, sc
		}
		kv0, sc0 := fresh()
		want := make([]float32, b*(s/ratio)*d)
		CompressorPool(want, c, z, b, s, d, ratio, kv0, sc0, 0)
		for _, n := range []int{1, 2, 3, 5, 7, 23} {
			kv, sc := fresh()
			got := make([][]float32, b) // pooled groups per batch row, in order
			for p := 0; p < s; p += n {
				m := min(n, s-p)
				cc, zz := rows(c, p, m), rows(z, p, m)
				g := (p+m)/ratio - p/ratio
				out := make([]float32, b*g*d)
				if CompressorPoolChunk(out, cc, zz, b, m, d, ratio, kv, sc, p) != g {
					t.Fatalf("ratio %d chunks of %d at %d: group count", ratio, n, p)
				}
				GroupStateChunk(kv, cc, b, m, d, ratio, p)
				GroupStateChunk(sc, zz, b, m, d, ratio, p)
				for bi := range b {
					got[bi] = append(got[bi], out[bi*g*d:(bi+1)*g*d]...)
				}
			}
			for bi := range b {
				w := want[bi*(s/ratio)*d : (bi+1)*(s/ratio)*d]
				for i := range w {
					if math.Float32bits(got[bi][i]) != math.Float32bits(w[i]) {
						t.Fatalf("ratio %d chunks of %d: row %d element %d: %v, want %v", ratio, n, bi, i, got[bi][i], w[i])
					}
				}
				for j := range s % ratio { // the pending tail
					o := (bi*ratio + j) * d
					if !slices.Equal(kv[o:o+d], kv0[o:o+d]) || !slices.Equal(sc[o:o+d], sc0[o:o+d]) {
						t.Fatalf("ratio %d chunks of %d: row %d state slot %d differs", ratio, n, bi, j)
					}
				}
			}
		}
	}
}

// TestWindowIdxChunk checks a chunk's window lists against the prefill's:
// the same positions in the same order (mapped to ring slots before the
// chunk), the same -1 padding at the end.
func TestWindowIdxChunk(t *testing.T) {
	const window, S = 8, 29
	pre := WindowIdxPrefill(S, window) // one call of S ≥ window tokens: rows of width window
	for _, n := range []int{1, 3, 8, 11} {
		for p := 0; p < S; p += n {
			m := min(n, S-p)
			got := WindowIdxChunk(p, m, window)
			for t0 := range m {
				for j := range window {
					w, g := pre[(p+t0)*window+j], got[t0*window+j]
					switch {
					case w < 0 && g == -1:
					case w < 0 || g < 0:
						t.Fatalf("chunks of %d at %d, query %d, entry %d: %d, want %d", n, p, t0, j, g, w)
					case int(w) < p && int(g) != int(w)%window, int(w) >= p && int(g) != window+int(w)-p:
						t.Fatalf("chunks of %d at %d, query %d, entry %d: index %d for position %d", n, p, t0, j, g, w)
					}
				}
			}
		}
	}
}
