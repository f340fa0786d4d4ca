package kernels

import (
	"fmt"
	"math"
)

// Gate is the MoE router (spec §4.10, reference Gate.forward with
// gate_temp 1 and norm_topk_prob true) for n tokens x [n, dim] (bf16 values):
//
//	logit[e] = fp32(x · w[e])            w [experts, dim] fp32; float64
//	                                     accumulation, one rounding
//	s[e]     = score(logit[e])           per scoreFunc, fp32:
//	  "sqrtsoftplus": sqrt(softplus(x)), softplus(x) = x for x > 20 (torch
//	                  threshold), else log1p(exp(x))
//	  "sigmoid":      1/(1+exp(−x))
//	  "softmax":      exp(x−max) · (1/Σ exp(x−max)) over the experts (torch's
//	                  last-dim softmax multiplies by the reciprocal)
//	sel      = top-k of fp32(s[e] + bias[e]), ordered by that biased score
//	           descending; ties: lower expert id first
//	weights  = s[sel] / (Σ s[sel] + fp32(1e-20)) · routeScale   (fp32; the sum
//	           in selection order; renormalisation only when topk > 1)
//
// The bias steers selection only. Outputs: indices [n, topk] (expert ids),
// weights [n, topk], both in selection order. bias may be nil (no bias).
// Transcendentals are float64 math rounded to float32.
func Gate(weights []float32, indices []int64, x []float32, n, dim int, w []float32, bias []float32, experts, topk int, routeScale float32, scoreFunc string) {
	if len(x) < n*dim || len(w) < experts*dim || len(weights) < n*topk || len(indices) < n*topk {
		panic("kernels.Gate: buffer too small")
	}
	if topk > experts {
		panic("kernels.Gate: topk > experts")
	}
	s := make([]float32, experts)
	biased := make([]float32, experts)
	scratch := make([]int, experts)
	for t := 0; t < n; t++ {
		xr := x[t*dim : (t+1)*dim]
		for e := 0; e < experts; e++ {
			var acc float64
			for i, v := range w[e*dim : (e+1)*dim] {
				acc += float64(float64(v) * float64(xr[i]))
			}
			s[e] = float32(acc)
		}
		gateScore(s, scoreFunc)
		for e := range biased {
			biased[e] = s[e]
			if bias != nil {
				biased[e] += bias[e]
			}
		}
		sel := indexTopOrder(biased, topk, scratch)
		wt := weights[t*topk : (t+1)*topk]
		var sum float32
		for i, e := range sel {
			indices[t*topk+i] = int64(e)
			wt[i] = s[e]
			sum += s[e]
		}
		if topk > 1 {
			den := sum + float32(1e-20)
			for i := range wt {
				wt[i] /= den
			}
		}
		for i := range wt {
			wt[i] *= routeScale
		}
	}
}

// gateScore applies the router score function to the logits in place.
func gateScore(s []float32, scoreFunc string) {
	switch scoreFunc {
	case "sqrtsoftplus":
		for i, x := range s {
			sp := x
			if x <= 20 {
				sp = float32(math.Log1p(math.Exp(float64(x))))
			}
			s[i] = float32(math.Sqrt(float64(sp)))
		}
	case "sigmoid":
		for i, x := range s {
			s[i] = float32(1 / (1 + math.Exp(-float64(x))))
		}
	case "softmax":
		m := float32(math.Inf(-1))
		for _, x := range s {
			m = max(m, x)
		}
		var sum float32
		for i, x := range s {
			s[i] = float32(math.Exp(float64(x - m)))
			sum += s[i]
		}
		inv := 1 / sum
		for i := range s {
			s[i] *= inv
		}
	default:
		panic(fmt.Sprintf("kernels.Gate: unknown score function %q", scoreFunc))
	}
}
