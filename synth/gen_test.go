package synth

import (
	"bytes"
	"testing"
)

// genFloat is gen's quantised kinds through float values (normals, then
// quantFP8Strip or quantRow), the definition genQuant must reproduce.
func genFloat(j job) (data, scales []byte) {
	t := j.t
	_, cols := t.logical()
	rows := j.r1 - j.r0
	r := newRNG(t.seed + uint64(j.idx)*0x9e3779b97f4a7c15)
	cb := ceilDiv(cols, 32)
	strip := 1
	switch t.kind {
	case kindFP8:
		strip = 32
		data, scales = make([]byte, rows*cols), make([]byte, ceilDiv(rows, 32)*cb)
	case kindFP8Row:
		data, scales = make([]byte, rows*cols), make([]byte, rows*cb)
	case kindFP4:
		data, scales = make([]byte, rows*cols/2), make([]byte, rows*cb)
	}
	for r0 := 0; r0 < rows; r0 += strip {
		n := min(strip, rows-r0)
		x := make([]float32, n*cols)
		r.normals(x, float32(t.mean), float32(t.std))
		switch t.kind {
		case kindFP8:
			quantFP8Strip(x, n, cols, data[r0*cols:], scales[(r0/32)*cb:(r0/32+1)*cb])
		case kindFP8Row:
			quantRow(x, data[r0*cols:(r0+1)*cols], scales[r0*cb:], false)
		case kindFP4:
			quantRow(x, data[r0*cols/2:(r0+1)*cols/2], scales[r0*cb:], true)
		}
	}
	return data, scales
}

// genQuant (table indices, exponent arithmetic) gives the bytes of the
// float path for every quantised kind, odd shapes, a non-zero mean, and
// scales far enough from 1 that the exponent shift leaves the normal range
// (its float fallback).
func TestGenQuantIsTheFloatPath(t *testing.T) {
	for _, k := range []kind{kindFP8, kindFP8Row, kindFP4} {
		for _, sh := range [][2]int{{70, 96}, {33, 37 * 2}, {1, 64}, {64, 160}} {
			for _, ms := range [][2]float64{{0, 0.05}, {1, 0.1}, {0, 3e-38}, {0, 1e30}, {-2, 1e-3}} {
				rows, cols := sh[0], sh[1]
				if k == kindFP4 && cols%32 != 0 {
					continue
				}
				shape := []int{rows, cols}
				if k == kindFP4 {
					shape = []int{rows, cols / 2}
				}
				tn := &tensor{name: "x", shape: shape, kind: k, mean: ms[0], std: ms[1], seed: 99, scale: &tensor{}}
				j := job{t: tn, r0: 0, r1: rows, idx: 3}
				var s scratch
				d, sc := gen(j, &s)
				wd, wsc := genFloat(j)
				if !bytes.Equal(d, wd) || !bytes.Equal(sc, wsc) {
					t.Errorf("kind %d shape %v mean %g std %g: genQuant differs from the float path", k, sh, ms[0], ms[1])
				}
			}
		}
	}
}

// BenchmarkGenFP4 compares gen's table path with the float path on one
// expert matrix (2304 x 5120 fp4).
func BenchmarkGenFP4(b *testing.B) {
	tn := &tensor{name: "x", shape: []int{2304, 2560}, kind: kindFP4, std: 0.06, scale: &tensor{}}
	j := job{t: tn, r0: 0, r1: 2304}
	b.Run("table", func(b *testing.B) {
		b.SetBytes(2304 * 2560)
		var s scratch
		for range b.N {
			gen(j, &s)
		}
	})
	b.Run("float", func(b *testing.B) {
		b.SetBytes(2304 * 2560)
		for range b.N {
			genFloat(j)
		}
	})
}
