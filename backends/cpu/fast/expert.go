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
			MatmulFP4(oe, xe, m, K, w.Codes, w.Scales, O)
		} else {
			MatmulFP8(oe, xe, m, K, w.Codes, w.Scales, O)
		}
		for r, s := range rows {
			copy(out[s*O:(s+1)*O], oe[r*O:(r+1)*O])
		}
		putBuf(xb)
		putBuf(ob)
	}
	return nil
}
