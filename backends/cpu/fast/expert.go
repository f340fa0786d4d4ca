package fast

import (
	"fmt"
	"sync"
)

// Expert is one expert's stored weight matrix [O, K] for ExpertMatmul.
type Expert struct {
	FP4    bool   // packed e2m1 [O, K/2] with scales [O, K/32]; else e4m3 [O, K] with [ceil(O/32), K/32]
	Codes  []byte // the weight codes as stored
	Scales []byte // e8m0 scales
}

// ExpertMatmul is the routed-expert GEMM (CPU op expert_matmul):
//
//	out[(i*k+j)*O : ...] = bf16(x_s · W_{idx[i*k+j]}ᵀ)
//
// for tokens i < N and slots j < k, where x_s is row i of x [N, K] or, when
// perSlot, row i*k+j of x [N, k, K]. Tokens are grouped by expert so that
// every chosen expert's weights are read once per call and run through the
// fast GEMM with all of its rows; experts nobody chose are not touched.
// expert(e) returns expert e's weights, ok = false when e is out of range.
func ExpertMatmul(out, x []float32, N, k, K, O int, perSlot bool, idx []int64, expert func(e int) (Expert, bool)) error {
	return expertMatmulRows(out, x, N, k, K, O, perSlot, idx, expert, false)
}

// expertMatmulRows is ExpertMatmul; perRow streams every expert's rows,
// however many (see PerRow).
func expertMatmulRows(out, x []float32, N, k, K, O int, perSlot bool, idx []int64, expert func(e int) (Expert, bool), perRow bool) error {
	slots := N * k
	check("ExpertMatmul", len(out), slots*O, len(idx), slots)
	if perSlot {
		check("ExpertMatmul", len(x), slots*K)
	} else {
		check("ExpertMatmul", len(x), N*K)
	}
	sc := expertScratchPool.Get().(*expertScratch)
	defer sc.put()
	// Group slots by expert, keeping the first-seen order of experts and
	// slot order within an expert: rows[start[g]:start[g+1]] are group g's
	// slots.
	order := sc.order[:0]
	groupOf := grown(sc.groupOf, slots)
	if sc.index == nil {
		sc.index = map[int64]int{}
	}
	for s := range slots {
		e := idx[s]
		g, ok := sc.index[e]
		if !ok {
			g = len(order)
			sc.index[e] = g
			order = append(order, e)
		}
		groupOf[s] = g
	}
	start := grown(sc.start, len(order)+1)
	clear(start)
	for _, g := range groupOf {
		start[g+1]++
	}
	for g := range order {
		start[g+1] += start[g]
	}
	rows := grown(sc.rows, slots)
	fill := grown(sc.fill, len(order))
	copy(fill, start[:len(order)])
	for s, g := range groupOf {
		rows[fill[g]] = s
		fill[g]++
	}
	sc.order, sc.groupOf, sc.start, sc.rows, sc.fill = order, groupOf, start, rows, fill
	// srcRow is the row of x that slot s reads
	srcRow := func(s int) int {
		if perSlot {
			return s
		}
		return s / k
	}
	ws := grown(sc.ws, len(order))
	sc.ws = ws
	for g, e := range order {
		w, ok := expert(int(e))
		if !ok {
			return fmt.Errorf("expert %d out of range", e)
		}
		ws[g] = w
	}
	// The experts on the streaming path (few rows each, every decode step)
	// run as one parallel job over all their row chunks: one fork-join per
	// call instead of one per expert.
	jobs := sc.jobs[:0]
	// fp4 experts read 16-bit packed activations: pack each row of x once
	// (a decode token feeds all its k experts) instead of once per expert
	ks := current()
	var packed []byte
	qlda := fp4QRowBytes((K / block) &^ 1)
	if ks.gemvFP4Q != nil && ks.packFP4Q != nil && qlda > 0 && anyFP4(ws) {
		var qb *[]float32
		rowsX := N
		if perSlot {
			rowsX = slots
		}
		if packed, qb = packFP4QRows(ks, x, rowsX, K, false); packed != nil {
			sc.bufs = append(sc.bufs, qb)
		}
	}
	outs := grown(sc.outs, len(order))
	sc.outs = outs
	for g := range order {
		rows := rows[start[g]:start[g+1]]
		m := len(rows)
		xb := getBuf(m * K)
		ob := getBuf(m * O)
		sc.bufs = append(sc.bufs, xb, ob)
		xe, oe := *xb, *ob
		outs[g] = oe
		w := ws[g]
		// the fp4 kernels on packed rows of whole 64-element chunks read
		// only the packed rows: the group's copy of x is left unfilled
		if !(w.FP4 && packed != nil && K%64 == 0) {
			for r, s := range rows {
				src := srcRow(s)
				copy(xe[r*K:(r+1)*K], x[src*K:(src+1)*K])
			}
		}
		kw := &weights{kind: kindFP8, n: O, k: K, q: w.Codes, s: w.Scales, kb: ceilDiv(K, block)}
		op := "MatmulFP8"
		if w.FP4 {
			kw.kind, op = kindFP4, "MatmulFP4"
		}
		if !expertMatmul(oe, xe, m, kw, op, perRow) {
			var q []byte // the group's packed rows
			if w.FP4 && packed != nil {
				if src := srcRow(rows[0]); m == 1 {
					q = packed[src*qlda : (src+1)*qlda]
				} else {
					qb := getBuf(m * qlda / 4)
					sc.bufs = append(sc.bufs, qb)
					q = asBytes(*qb)
					pairFP4QRows(ks, q, qlda, m, func(r int) []byte {
						src := srcRow(rows[r])
						return packed[src*qlda : (src+1)*qlda]
					})
				}
			}
			task, chunks, release := decodeTasks(ks, oe, xe, m, kw, true, q)
			jobs = append(jobs, expertJob{task, chunks})
			sc.releases = append(sc.releases, release)
		}
	}
	sc.jobs = jobs
	if len(jobs) > 0 {
		total := 0
		for _, j := range jobs {
			total += j.chunks
		}
		parallel(total, func(c int) {
			for _, j := range jobs {
				if c < j.chunks {
					j.task(c)
					return
				}
				c -= j.chunks
			}
		})
	}
	for g := range order {
		for r, s := range rows[start[g]:start[g+1]] {
			copy(out[s*O:(s+1)*O], outs[g][r*O:(r+1)*O])
		}
	}
	return nil
}

// expertJob is one expert's streaming matmul: its per-chunk task.
type expertJob struct {
	task   func(c int)
	chunks int
}

// expertScratch is the reusable bookkeeping of an ExpertMatmul call (a
// decode step makes one per MoE layer: its maps and slices were thousands
// of allocations a step).
type expertScratch struct {
	index                      map[int64]int // expert → group
	order                      []int64
	groupOf, start, rows, fill []int
	ws                         []Expert
	jobs                       []expertJob
	outs                       [][]float32
	bufs                       []*[]float32 // getBuf's, put back by put
	releases                   []func()     // decodeTasks'
}

var expertScratchPool = sync.Pool{New: func() any { return new(expertScratch) }}

// put releases the call's buffers and returns sc to the pool (nothing it
// holds points into the call's operands).
func (sc *expertScratch) put() {
	for _, r := range sc.releases {
		r()
	}
	for _, b := range sc.bufs {
		putBuf(b)
	}
	clear(sc.index)
	clear(sc.ws)
	clear(sc.jobs)
	clear(sc.outs)
	clear(sc.bufs)
	clear(sc.releases)
	sc.ws, sc.jobs, sc.outs, sc.bufs, sc.releases = sc.ws[:0], sc.jobs[:0], sc.outs[:0], sc.bufs[:0], sc.releases[:0]
	expertScratchPool.Put(sc)
}

// grown is s resized to n elements (reallocated when its capacity is
// short; the contents are not kept).
func grown[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// anyFP4 reports whether one of the experts is fp4.
func anyFP4(ws []Expert) bool {
	for _, w := range ws {
		if w.FP4 {
			return true
		}
	}
	return false
}

// expertStreamMaxM is the largest number of rows of one expert that takes
// the streaming (GEMV) path: an expert's few prefill rows cost less
// re-dequantised in registers per row than through a packed panel of the
// whole matrix (measured on AVX2: 8 rows ≈ 3× faster, 16 rows even).
const expertStreamMaxM = 12

// expertMatmul checks the operands of MatmulFP8/MatmulFP4 and runs the
// matmul when the expert has too many rows for the streaming path (or none);
// it reports whether it did, else the caller runs decode.
func expertMatmul(out, a []float32, m int, w *weights, op string, perRow bool) bool {
	if w.kind == kindFP4 {
		if w.k%2 != 0 {
			panic(fmt.Sprintf("fast.%s: k = %d is odd (fp4 packs two values per byte)", op, w.k))
		}
		check(op, len(out), m*w.n, len(a), m*w.k, len(w.q), w.n*w.k/2, len(w.s), w.n*w.kb)
	} else {
		check(op, len(out), m*w.n, len(a), m*w.k, len(w.q), w.n*w.k, len(w.s), ceilDiv(w.n, block)*w.kb)
	}
	if m == 0 || w.n == 0 || w.k == 0 || (m > expertStreamMaxM && !perRow && !streamsAll(current(), w)) {
		matmul(out, a, m, w, true)
		return true
	}
	return false
}
