package fast

import "fmt"

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
	slots := N * k
	check("ExpertMatmul", len(out), slots*O, len(idx), slots)
	if perSlot {
		check("ExpertMatmul", len(x), slots*K)
	} else {
		check("ExpertMatmul", len(x), N*K)
	}
	// Group slots by expert, keeping the first-seen order of experts and
	// slot order within an expert.
	groups := map[int64][]int{}
	var order []int64
	for s := range slots {
		e := idx[s]
		if _, ok := groups[e]; !ok {
			order = append(order, e)
		}
		groups[e] = append(groups[e], s)
	}
	ws := make([]Expert, len(order))
	for g, e := range order {
		w, ok := expert(int(e))
		if !ok {
			return fmt.Errorf("expert %d out of range", e)
		}
		ws[g] = w
	}
	for g, e := range order {
		rows := groups[e]
		m := len(rows)
		xb := getBuf(m * K)
		ob := getBuf(m * O)
		xe, oe := *xb, *ob
		for r, s := range rows {
			src := s / k
			if perSlot {
				src = s
			}
			copy(xe[r*K:(r+1)*K], x[src*K:(src+1)*K])
		}
		if w := ws[g]; w.FP4 {
			expertMatmul(oe, xe, m, &weights{kind: kindFP4, n: O, k: K, q: w.Codes, s: w.Scales, kb: ceilDiv(K, block)}, "MatmulFP4")
		} else {
			expertMatmul(oe, xe, m, &weights{kind: kindFP8, n: O, k: K, q: w.Codes, s: w.Scales, kb: ceilDiv(K, block)}, "MatmulFP8")
		}
		for r, s := range rows {
			copy(out[s*O:(s+1)*O], oe[r*O:(r+1)*O])
		}
		putBuf(xb)
		putBuf(ob)
	}
	return nil
}

// expertStreamMaxM is the largest number of rows of one expert that takes
// the streaming (GEMV) path: an expert's few prefill rows cost less
// re-dequantised in registers per row than through a packed panel of the
// whole matrix (measured on AVX2: 8 rows ≈ 3× faster, 16 rows even).
const expertStreamMaxM = 12

// expertMatmul is MatmulFP8/MatmulFP4 with the expert's row threshold.
func expertMatmul(out, a []float32, m int, w *weights, op string) {
	if w.kind == kindFP4 {
		if w.k%2 != 0 {
			panic(fmt.Sprintf("fast.%s: k = %d is odd (fp4 packs two values per byte)", op, w.k))
		}
		check(op, len(out), m*w.n, len(a), m*w.k, len(w.q), w.n*w.k/2, len(w.s), w.n*w.kb)
	} else {
		check(op, len(out), m*w.n, len(a), m*w.k, len(w.q), w.n*w.k, len(w.s), ceilDiv(w.n, block)*w.kb)
	}
	if m > expertStreamMaxM || m == 0 || w.n == 0 || w.k == 0 {
		matmul(out, a, m, w, true)
		return
	}
	decode(current(), out, a, m, w, true)
}
