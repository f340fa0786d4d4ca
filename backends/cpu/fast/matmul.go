package fast

import (
	"bytes"
	"fmt"
	"runtime"

	"github.com/ds4go/ds4/internal/numfmt"
)

type wkind int

const (
	kindF32 wkind = iota
	kindFP8
	kindFP4
	kindBF16 // raw little-endian bf16 bytes in q [n, k*2]
)

// weights describes a [n, k] weight matrix as stored.
type weights struct {
	kind wkind
	n, k int
	f32  []float32 // kindF32: [n, k]
	q    []byte    // kindFP8: e4m3 [n, k]; kindFP4: packed e2m1 [n, k/2]
	s    []byte    // e8m0 scales: fp8 [ceil(n/32), kb], fp4 [n, kb]
	kb   int       // ceil(k/32)
}

// MatmulFP8 is kernels.MatmulFP8: out [m,n] = bf16(a·dequant(w)ᵀ) with w e4m3
// [n,k] and e8m0 block scales wScale [ceil(n/32), ceil(k/32)].
func MatmulFP8(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP8(out, a, m, k, w, wScale, n, rowsAuto)
}

// MatmulFP4 is kernels.MatmulFP4: w packed e2m1 [n, k/2] (low nibble = even
// k), wScale e8m0 [n, ceil(k/32)]; k must be even.
func MatmulFP4(out, a []float32, m, k int, w, wScale []byte, n int) {
	matmulFP4(out, a, m, k, w, wScale, n, rowsAuto)
}

// MatmulF32 is kernels.MatmulF32: out = a·wᵀ in fp32, a [m,k], w [n,k].
func MatmulF32(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulF32", out, a, w, m, k, n, false, rowsAuto)
}

// MatmulBF16 is kernels.MatmulBF16: out = bf16(a·wᵀ) with fp32 accumulation.
func MatmulBF16(out, a, w []float32, m, k, n int) {
	matmulF32("MatmulBF16", out, a, w, m, k, n, true, rowsAuto)
}

// matmulFP8, matmulFP4, matmulF32 and matmulW16 check a product's
// arguments and run it with the kernels mode picks: the one body of each
// format's plain, PerRow and Packed forms.
func matmulFP8(out, a []float32, m, k int, w, wScale []byte, n int, mode rowMode) {
	kb := ceilDiv(k, block)
	check("MatmulFP8", len(out), m*n, len(a), m*k, len(w), n*k, len(wScale), ceilDiv(n, block)*kb)
	matmulRows(out, a, m, &weights{kind: kindFP8, n: n, k: k, q: w, s: wScale, kb: kb}, true, mode)
}

func matmulFP4(out, a []float32, m, k int, w, wScale []byte, n int, mode rowMode) {
	if k%2 != 0 {
		panic(fmt.Sprintf("fast.MatmulFP4: k = %d is odd (fp4 packs two values per byte)", k))
	}
	kb := ceilDiv(k, block)
	check("MatmulFP4", len(out), m*n, len(a), m*k, len(w), n*k/2, len(wScale), n*kb)
	matmulRows(out, a, m, &weights{kind: kindFP4, n: n, k: k, q: w, s: wScale, kb: kb}, true, mode)
}

func matmulF32(name string, out, a, w []float32, m, k, n int, round bool, mode rowMode) {
	check(name, len(out), m*n, len(a), m*k, len(w), n*k)
	matmulRows(out, a, m, &weights{kind: kindF32, n: n, k: k, f32: w, kb: ceilDiv(k, block)}, round, mode)
}

func matmulW16(name string, out, a []float32, w []byte, m, k, n int, round bool, mode rowMode) {
	check(name, len(out), m*n, len(a), m*k, len(w), 2*n*k)
	matmulRows(out, a, m, &weights{kind: kindBF16, n: n, k: k, q: w, kb: ceilDiv(k, block)}, round, mode)
}

func matmul(out, a []float32, m int, w *weights, round bool) {
	matmulRows(out, a, m, w, round, rowsAuto)
}

// rowMode is how a kernel picks its code by the number of rows.
type rowMode uint8

const (
	rowsAuto   rowMode = iota // the fastest for the row count
	rowsStream                // the streaming kernels at every count: each row as a one-row call computes it (see PerRow)
	rowsPacked                // the packed GEMM at every count: each row as a call of many rows computes it (see Packed)
)

// stream reports whether m rows take the streaming kernels under mode
// (those of up to max rows do in rowsAuto).
func (mode rowMode) stream(m, max int) bool {
	return mode == rowsStream || mode == rowsAuto && m <= max
}

// matmulRows is matmul with the kernels mode picks.
func matmulRows(out, a []float32, m int, w *weights, round bool, mode rowMode) {
	if m == 0 || w.n == 0 {
		return
	}
	if w.k == 0 {
		clear(out[:m*w.n])
		return
	}
	ks := current()
	if mode.stream(m, decodeMaxM) || streamsAll(ks, w) {
		decode(ks, out, a, m, w, round)
	} else {
		prefill(ks, out, a, m, w, round)
	}
}

// streamsAll reports whether every row count of a matmul on w takes the
// streaming kernels: fp4 with the 16-bit activation kernels, which compute a
// row the same way whatever the number of rows (so a token's result does
// not depend on the call's shape) and, decoding a block once for up to 6
// rows with 4 VPMADDWD per 64 weights and row, outrun the f32 GEMM.
func streamsAll(ks *kernelSet, w *weights) bool {
	return w.kind == kindFP4 && ks.gemvFP4Q != nil && ks.packFP4Q != nil
}

// fusedSet returns the kernel set whose fused dequantising dots accept the
// scales of w (the assembly folds 2^(e−7) or 2^(e−127) into one multiply and
// needs the byte in range); otherwise the portable set.
func fusedSet(ks *kernelSet, w *weights) *kernelSet {
	if ks == portable {
		return ks
	}
	switch w.kind {
	case kindFP8:
		for _, e := range w.s {
			if e > maxFP8Scale && e != 0xff {
				return portable
			}
		}
		if bytes.IndexByte(w.s, 0xff) >= 0 {
			return portable
		}
	case kindFP4:
		if bytes.IndexByte(w.s, 0) >= 0 || bytes.IndexByte(w.s, 0xff) >= 0 {
			return portable
		}
	}
	return ks
}

// decodeRows is the number of weight rows per parallel task of decode: one
// 32-row group of fp8 scales (gemvFP8 takes one group's factors).
const decodeRows = block

// decode streams every weight row once and dots it with the m activation
// rows (the row stays in L1 between them; the gemv kernels dequantise each
// block once for up to gemvRows rows).
func decode(ks *kernelSet, out, a []float32, m int, w *weights, round bool) {
	task, chunks, release := decodeTasks(ks, out, a, m, w, round, nil)
	parallel(chunks, task)
	release()
}

// decodeTasks prepares decode (the permuted or packed activations) and
// returns its per-chunk task, the number of chunks and the function that
// releases the scratch once every chunk has run. packed, when not nil, holds
// a's rows already packed by packFP4Q (fp4 weights; fp4QRowBytes of the even
// block count apart) and laid out by pairFP4QRows, which the caller keeps
// alive until then.
func decodeTasks(ks *kernelSet, out, a []float32, m int, w *weights, round bool, packed []byte) (task func(c int), chunks int, release func()) {
	release = func() {}
	k, n, kb := w.k, w.n, w.kb
	nb := k / block // full blocks handled by the fused kernels
	fs := ks
	gemv := w.kind == kindFP4 && ks.gemvFP4 != nil // any scale byte: no scan of the scales
	if !gemv {
		fs = fusedSet(ks, w)
		gemv = w.kind == kindFP8 && fs.gemvFP8 != nil
	}
	nbv := nb // blocks of the vector kernel; the rest is done in Go on unpermuted activations
	act := a
	// fp8: the rows whose activations keep the old scaling (not
	// fp8Scalable); nil when there is none
	var unscaled []bool
	// fp4 on activations packed as 16-bit integers when they all pack
	// (finite), else the float kernels
	var qrows []byte
	qlda := fp4QRowBytes(nb &^ 1)
	if w.kind == kindFP4 && ks.gemvFP4Q != nil && ks.packFP4Q != nil && qlda > 0 {
		if qrows = packed; qrows == nil {
			var qb *[]float32
			qrows, qb = packFP4QRows(ks, a, m, k, true)
			if qrows != nil {
				release = func() { putBuf(qb) }
			}
		}
		if qrows != nil {
			gemv, nbv = true, nb&^1
		}
	}
	if qrows == nil && ((w.kind == kindFP4 && (gemv || fs.fp4Group > 2)) || (w.kind == kindFP8 && gemv)) {
		pb := getBuf(m * k)
		release = func() { putBuf(pb) }
		act = *pb
		if w.kind == kindFP4 && gemv {
			nbv = nb &^ 1
		}
		for i := range m {
			src, dst := a[i*k:(i+1)*k], act[i*k:(i+1)*k]
			ps := fp8PreScale // fp8: whole blocks times 2^64 (see fp8PreScaleExp)
			if w.kind == kindFP8 && !fp8Scalable(ks, src[:nb*block]) {
				if unscaled == nil {
					unscaled = make([]bool, m)
				}
				unscaled[i], ps = true, 1
			}
			switch {
			case w.kind == kindFP8 && fs.fp8Pairs:
				permuteFP8x32Pairs(dst, src, ps)
			case w.kind == kindFP8:
				permuteFP8x32(dst, src, ps)
			case gemv:
				permuteFP4x64(dst[:nbv*block], src[:nbv*block])
				copy(dst[nbv*block:], src[nbv*block:])
			default:
				permuteFP4(dst[:nb*block], src[:nb*block], fs.fp4Group)
				copy(dst[nb*block:], src[nb*block:])
			}
		}
	}
	chunks = ceilDiv(n, decodeRows)
	// Per-chunk scratch of the gemv kernels (a local array would escape):
	// the partials and, for fp8, the block factors of the chunk's 32-row
	// group (decodeRows = block, so a chunk is one group).
	var tmps, facs []float32
	fpc := max(nb, 1) // factors a chunk: the pre-scaled ones, then (unscaled rows) the plain ones
	if unscaled != nil {
		fpc *= 2
	}
	if gemv && (qrows == nil || nbv != kb) { // (the whole-block paths write out directly)
		prev := release // (the packed or permuted activations)
		if w.kind != kindFP8 || nbv != kb {
			tb := getBuf(chunks * gemvRows * decodeRows)
			tmps = *tb
			release = func() { prev(); putBuf(tb) }
		}
		if w.kind == kindFP8 {
			fb := getBuf(chunks * fpc)
			facs = *fb
			prevT := release
			release = func() { prevT(); putBuf(fb) }
		}
	}
	task = func(c int) {
		j0, j1 := c*decodeRows, min(n, (c+1)*decodeRows)
		if gemv {
			var fac, facPlain []float32 // the pre-scaled rows' factors, the unscaled rows'
			if w.kind == kindFP8 {
				fac = facs[c*fpc : c*fpc+nb]
				for b, e := range w.s[c*kb : c*kb+nb] {
					fac[b] = fp8FactorPre(e)
				}
				if unscaled != nil {
					facPlain = facs[c*fpc+nb : c*fpc+2*nb]
					for b, e := range w.s[c*kb : c*kb+nb] {
						facPlain[b] = fp8Factor(e)
					}
				}
			}
			whole := nbv == kb
			if qrows != nil && whole {
				// straight into out, rounded there (the many-row fp4
				// matmuls of prefill come this way), 6 rows per weight pass
				for i0 := 0; i0 < m; i0 += gemvQRows {
					r := min(gemvQRows, m-i0)
					ks.gemvFP4Q(qrows[i0*qlda:], qlda, r, w.q[j0*k/2:], w.s[j0*kb:], nbv, j1-j0, out[i0*n+j0:], n)
					if round {
						for i := range r {
							BF16RoundSlice(out[(i0+i)*n+j0 : (i0+i)*n+j1])
						}
					}
				}
				return
			}
			if w.kind == kindFP8 && whole {
				// whole blocks: the kernel writes the chunk's sums into out,
				// rounded there by rows (the same bits as the per-element
				// loop below, with no Go pass per output)
				per := gemvRows
				if fs.fp8Rows > 0 {
					per = fs.fp8Rows
				}
				if unscaled != nil { // a row's factors are its own (its sums do not depend on the rows beside it)
					per = 1
				}
				for i0 := 0; i0 < m; i0 += per {
					r := min(per, m-i0)
					nan := fs.gemvFP8(act[i0*k:], k, r, w.q[j0*k:], fp8RowFactors(fac, facPlain, unscaled, i0), nb, j1-j0, out[i0*n+j0:], n)
					for i := range r {
						o := out[(i0+i)*n+j0 : (i0+i)*n+j1]
						if nan { // the vector kernels do not decode NaN codes
							ar := a[(i0+i)*k : (i0+i+1)*k]
							for j := j0; j < j1; j++ {
								o[j-j0], _ = dotFP8Go(ar, w.q[j*k:(j+1)*k], w.s[(j/block)*kb:(j/block)*kb+nb])
							}
						}
						if round {
							BF16RoundSlice(o)
						}
					}
				}
				return
			}
			// one call per group of activation rows covers the chunk's weight
			// rows when they are contiguous with no Go tail; else a call per row
			tmp := tmps[c*gemvRows*decodeRows : (c+1)*gemvRows*decodeRows]
			step := gemvRows
			if unscaled != nil {
				step = 1
			}
			for i0 := 0; i0 < m; i0 += step {
				r := min(step, m-i0)
				ai := act[i0*k:]
				var nan bool
				for j := j0; j < j1; {
					rows := 1
					if whole {
						rows = j1 - j
					}
					if qrows != nil {
						ks.gemvFP4Q(qrows[i0*qlda:], qlda, r, w.q[j*k/2:], w.s[j*kb:], nbv, rows, tmp[j-j0:], decodeRows)
					} else if w.kind == kindFP4 {
						ks.gemvFP4(ai, k, r, w.q[j*k/2:], w.s[j*kb:], nbv, rows, tmp[j-j0:], decodeRows)
					} else {
						nan = fs.gemvFP8(ai, k, r, w.q[j*k:], fp8RowFactors(fac, facPlain, unscaled, i0), nb, rows, tmp[j-j0:], decodeRows) || nan
					}
					j += rows
				}
				for j := j0; j < j1; j++ {
					for i := range r {
						arow := act[(i0+i)*k : (i0+i+1)*k]
						v := tmp[i*decodeRows+j-j0]
						if w.kind == kindFP4 {
							srow, wrow := w.s[j*kb:(j+1)*kb], w.q[j*k/2:(j+1)*k/2]
							v += tailFP4(arow, wrow, srow, nbv, kb, k)
						} else {
							srow, wrow := w.s[(j/block)*kb:(j/block+1)*kb], w.q[j*k:(j+1)*k]
							if nan { // the vector kernels do not decode NaN codes
								v, _ = dotFP8Go(a[(i0+i)*k:(i0+i+1)*k], wrow, srow[:nb])
							}
							v += tailFP8(arow, wrow, srow, nb, kb, k)
						}
						if round {
							v = numfmt.BF16Round(v)
						}
						out[(i0+i)*n+j] = v
					}
				}
			}
			return
		}
		if w.kind == kindBF16 && m > 1 && ks.dotW16Rows != nil {
			// a weight row widened once for several activation rows; a
			// group of them stays in L1 while the chunk's weight rows
			// stream (the chunk's rows are then read from L2 for the next
			// group)
			var sums [dotW16RowsMax]float32
			g := dotW16Group(m)
			for i0 := 0; i0 < m; i0 += g {
				r := min(g, m-i0)
				for j := j0; j < j1; j++ {
					wrow := w.q[2*j*k : 2*(j+1)*k]
					ks.dotW16Rows(act[i0*k:], k, r, wrow, sums[:r])
					for i, v := range sums[:r] {
						if round {
							v = numfmt.BF16Round(v)
						}
						out[(i0+i)*n+j] = v
					}
				}
			}
			return
		}
		for j := j0; j < j1; j++ {
			for i := range m {
				arow := act[i*k : (i+1)*k]
				var v float32
				switch w.kind {
				case kindF32:
					v = ks.dot(arow, w.f32[j*k:(j+1)*k])
				case kindBF16:
					v = ks.dotBF16(arow, w.q[2*j*k:2*(j+1)*k])
				case kindFP8:
					srow := w.s[(j/block)*kb : (j/block+1)*kb]
					wrow := w.q[j*k : (j+1)*k]
					var nan bool
					v, nan = fs.dotFP8(arow, wrow, srow[:nb])
					if nan {
						v, _ = dotFP8Go(arow, wrow, srow[:nb])
					}
					v += tailFP8(arow, wrow, srow, nb, kb, k)
				case kindFP4:
					srow := w.s[j*kb : (j+1)*kb]
					wrow := w.q[j*k/2 : (j+1)*k/2]
					v = fs.dotFP4(arow, wrow, srow[:nb]) + tailFP4(arow, wrow, srow, nb, kb, k)
				}
				if round {
					v = numfmt.BF16Round(v)
				}
				out[i*n+j] = v
			}
		}
	}
	return task, chunks, release
}

// fp8RowFactors is the factors of activation row i: plain when the row
// keeps the old scaling (unscaled[i]), else the pre-scaled ones.
func fp8RowFactors(fac, plain []float32, unscaled []bool, i int) []float32 {
	if unscaled != nil && unscaled[i] {
		return plain
	}
	return fac
}

// dotW16Group is the number of activation rows per dotW16Rows call for a
// call of m rows: groups of about equal size, at most dotW16L1Rows rows
// (their f32 rows of the 2,048-wide models stay in L1 with the weights).
func dotW16Group(m int) int {
	return ceilDiv(m, ceilDiv(m, dotW16L1Rows))
}

// dotW16L1Rows is the most activation rows dotW16Group puts in a group.
const dotW16L1Rows = 4

// tailFP8 returns the dot of the columns from block nb on (a partial block).
func tailFP8(arow []float32, wrow, srow []byte, nb, kb, k int) float32 {
	if nb == kb {
		return 0
	}
	var p float32
	for c := nb * block; c < k; c++ {
		p += arow[c] * lutE4M3[wrow[c]]
	}
	return p * lutE8M0[srow[nb]]
}

// tailFP4 returns the dot of the columns from block from on: whole blocks
// (activations not permuted there) and a partial last block.
func tailFP4(arow []float32, wrow, srow []byte, from, kb, k int) float32 {
	if from == kb {
		return 0
	}
	nb := k / block
	v := dotFP4Go(arow[from*block:nb*block], wrow[from*block/2:nb*block/2], srow[from:nb])
	if nb < kb {
		var p float32
		for c := nb * block; c < k; c += 2 {
			b := wrow[c/2]
			p += arow[c]*lutE2M1[b&15] + arow[c+1]*lutE2M1[b>>4]
		}
		v += p * lutE8M0[srow[nb]]
	}
	return v
}

// Blocking of the prefill GEMM.
const (
	kcBlock = 256 // K depth of one micro-kernel call
	mcRows  = 120 // rows of C kept hot while a KC slice of B is reused
)

// prefill runs the packed GEMM: A packed once [mt][k][mr], each task packs
// (dequantises) its N columns of B into [slices][k][nr] and runs the
// micro-kernel over its M tiles, B slices outside A tiles (BLIS's order: a
// kc×nr B micro-panel stays in L1 while the A tiles stream from L2;
// FP8GEMM 118–132 → 126–139 GFLOP/s in interleaved runs). Each C tile
// receives its KC slices in order either way.
func prefill(ks *kernelSet, out, a []float32, m int, w *weights, round bool) {
	mr, nr := ks.mr, ks.nr
	k, n := w.k, w.n
	mt := ceilDiv(m, mr)
	apb := getBuf(mt * k * mr)
	defer putBuf(apb)
	ap := *apb
	parallel(ceilDiv(mt, 8), func(c int) {
		for t := c * 8; t < min(mt, c*8+8); t++ {
			packA(ap[t*k*mr:(t+1)*k*mr], a, t*mr, min(mr, m-t*mr), k, mr)
		}
	})
	slices := ceilDiv(n, nr)
	p := runtime.GOMAXPROCS(0)
	spi := min(max(ceilDiv(slices, 4*p), 1), 8) // slices per task
	nItems := ceilDiv(slices, spi)
	tilesPer := mt
	if nItems < 2*p {
		tilesPer = ceilDiv(mt, min(mt, ceilDiv(2*p, nItems)))
	}
	mItems := ceilDiv(mt, tilesPer)
	mcTiles := max(1, mcRows/mr)
	parallel(nItems*mItems, func(it int) {
		ni, mi := it%nItems, it/nItems
		s0, s1 := ni*spi, min(slices, ni*spi+spi)
		t0, t1 := mi*tilesPer, min(mt, mi*tilesPer+tilesPer)
		j0, j1 := s0*nr, min(n, s1*nr)
		bpb := getBuf((s1 - s0) * k * nr)
		bp := *bpb
		for s := s0; s < s1; s++ {
			packB(bp[(s-s0)*k*nr:(s-s0+1)*k*nr], w, s*nr, min(nr, n-s*nr), nr)
		}
		i0, i1 := t0*mr, min(m, t1*mr)
		for i := i0; i < i1; i++ {
			clear(out[i*n+j0 : i*n+j1])
		}
		tb := getBuf(mr * nr)
		defer putBuf(tb)
		tmp := *tb
		for tc0 := t0; tc0 < t1; tc0 += mcTiles {
			tc1 := min(t1, tc0+mcTiles)
			for k0 := 0; k0 < k; k0 += kcBlock {
				kc := min(kcBlock, k-k0)
				for s := s0; s < s1; s++ {
					bps := bp[((s-s0)*k+k0)*nr:]
					cols := min(nr, n-s*nr)
					for t := tc0; t < tc1; t++ {
						apt := ap[(t*k+k0)*mr:]
						rows := min(mr, m-t*mr)
						c0 := t*mr*n + s*nr
						if rows == mr && cols == nr {
							ks.tile(apt, bps, out[c0:], n, kc)
							continue
						}
						clear(tmp)
						for i := range rows {
							copy(tmp[i*nr:i*nr+cols], out[c0+i*n:c0+i*n+cols])
						}
						ks.tile(apt, bps, tmp, nr, kc)
						for i := range rows {
							copy(out[c0+i*n:c0+i*n+cols], tmp[i*nr:i*nr+cols])
						}
					}
				}
			}
		}
		if round {
			for i := i0; i < i1; i++ {
				BF16RoundSlice(out[i*n+j0 : i*n+j1])
			}
		}
		putBuf(bpb)
	})
}

// packA writes rows i0..i0+rows of a [*, k] into dst [k][mr] (zero padded).
func packA(dst, a []float32, i0, rows, k, mr int) {
	if rows < mr {
		clear(dst)
	}
	for c0 := 0; c0 < k; c0 += 64 {
		c1 := min(k, c0+64)
		for i := range rows {
			src := a[(i0+i)*k+c0 : (i0+i)*k+c1]
			for c, v := range src {
				dst[(c0+c)*mr+i] = v
			}
		}
	}
}

// packB dequantises weight rows j0..j0+cols (scale folded in, exact) into
// dst [k][nr], zero padding the columns ≥ cols.
func packB(dst []float32, w *weights, j0, cols, nr int) {
	if cols%8 == 0 && packB8(dst, w, j0, cols, nr) {
		if cols < nr {
			for c := range w.k {
				clear(dst[c*nr+cols : (c+1)*nr])
			}
		}
		return
	}
	packBGo(dst, w, j0, cols, nr)
}

// packB8 is packB by the vector kernel of the current level, 8 rows at a
// time, when there is one for the weights (f32 weights are left to the
// scalar copy); it reports whether it did the work.
func packB8(dst []float32, w *weights, j0, cols, nr int) bool {
	ks := current()
	k, kb := w.k, w.kb
	if ks.pack8 == nil || w.kind == kindF32 {
		return false
	}
	switch w.kind {
	case kindFP8:
		if k%block != 0 || !fp8Exact(w.q[j0*k:(j0+cols)*k], w.s[(j0/block)*kb:(j0/block+1)*kb]) {
			return false
		}
	case kindFP4:
		if k%block != 0 {
			return false
		}
	case kindBF16:
		if k%8 != 0 {
			return false
		}
	}
	for jj := 0; jj < cols; jj += 8 {
		j := j0 + jj
		switch w.kind {
		case kindFP8:
			ks.pack8(kindFP8, dst[jj:], nr, w.q[j*k:], k, w.s[(j/block)*kb:], 0, kb)
		case kindFP4:
			ks.pack8(kindFP4, dst[jj:], nr, w.q[j*k/2:], k/2, w.s[j*kb:], kb, kb)
		case kindBF16:
			ks.pack8(kindBF16, dst[jj:], nr, w.q[2*j*k:], 2*k, nil, 0, k/8)
		}
	}
	return true
}

// packBGo is packB in Go.
func packBGo(dst []float32, w *weights, j0, cols, nr int) {
	k, kb := w.k, w.kb
	if cols < nr {
		clear(dst)
	}
	for b := range kb {
		c0, c1 := b*block, min(k, (b+1)*block)
		d := dst[c0*nr : c1*nr]
		for jj := range cols {
			j := j0 + jj
			switch w.kind {
			case kindF32:
				for c, v := range w.f32[j*k+c0 : j*k+c1] {
					d[c*nr+jj] = v
				}
			case kindBF16:
				src := w.q[2*(j*k+c0) : 2*(j*k+c1)]
				for c := range c1 - c0 {
					d[c*nr+jj] = bf16At(src, c)
				}
			case kindFP8:
				sc := lutE8M0[w.s[(j/block)*kb+b]]
				for c, q := range w.q[j*k+c0 : j*k+c1] {
					d[c*nr+jj] = lutE4M3[q] * sc
				}
			case kindFP4:
				sc := lutE8M0[w.s[j*kb+b]]
				for c, q := range w.q[(j*k+c0)/2 : (j*k+c1)/2] {
					d[2*c*nr+jj] = lutE2M1[q&15] * sc
					d[(2*c+1)*nr+jj] = lutE2M1[q>>4] * sc
				}
			}
		}
	}
}
