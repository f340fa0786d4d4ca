// Package gorgonia is a third backend behind the plugin interface: it runs
// the f32 subset of the op table that gorgonia (gorgonia.org/gorgonia
// v0.9.18, gorgonia.org/tensor v0.9.24) computes with the same math as the
// CPU reference, through an ExprGraph and a TapeMachine. backends.Schedule
// places every other node on the CPU backend. It proves the plugin contract
// with an engine we did not write, and gives an independent f32 cross-check.
//
// # Supported nodes
//
// Capabilities (refined by Supports) accept a node only when its output and every operand are f32:
//
//   - matmul: y = x·wᵀ, x [..., K] flattened to [M, K], w [N, K]; run as
//     BatchedMatMul([1,M,K], [1,N,K], transB) so the weight is read in place
//     (gonum Sgemm: f32 accumulation in another order than the reference,
//     rel L2 ≈ 2–4e-7 on random data).
//   - add, sub, mul, div: same shape, or numpy broadcasting that gorgonia's
//     Broadcast* ops handle. Operands are bound with the same rank; axes of
//     size 1 on both sides are dropped and neighbouring axes that broadcast
//     alike are merged; gorgonia v0.9 broadcasts at most 4 axes, so a node
//     needing more is declined. Every axis must be statically equal or a
//     constant 1 on one side. Results are bit-identical to the CPU backend.
//   - sigmoid: gorgonia's f32 sigmoid is float32(1/(1+math.Exp(-x))) like the
//     reference, except that it returns exactly 1 above x = 15 (the reference
//     gives 1-1.8e-7 at 15.5) and 0 below -88 (the reference gives a
//     subnormal ≤ 3.7e-39): absolute differences ≤ 1.8e-7.
//   - sqrt (math32.Sqrt, correctly rounded like the reference).
//   - add_scalar, mul_scalar (value rounded to f32, as the reference does).
//
// Everything else is declined: bf16/f16 outputs or operands (bf16 rounding is
// not gorgonia's), quantised matmuls (matmul_fp8, matmul_fp4, grouped and
// expert matmuls), integer ops, state and cache ops, reductions, norms,
// attention. exp is declined too: gorgonia/tensor computes f32 exp with
// chewxy/math32.Exp, up to 8.8e-6 relative away from the reference's
// float32(math.Exp(float64(x))) on [-80, 80] (TestExpIsNotTheSameMath).
//
// # Kernels
//
// Kernel (one per node, at Prepare) returns a closure with its own cache: one compiled graph per set of
// run-time operand shapes. A call binds the operands' F32 slices as the
// graph's inputs (tensor.New(tensor.WithBacking(slice), tensor.WithShape(...)),
// no copy; gorgonia never writes them), runs the tape machine, and copies the
// result into a new backends.Tensor of the node's dtype. One graph runs one
// call at a time.
//
// # Use
//
// Importing the package registers the backend as "gorgonia":
//
//	import _ "github.com/ds4go/ds4/backends/gorgonia"
//
//	model, err := engine.Open(module, dir, "gorgonia") // CPU fallback for the rest
//	fmt.Println(model.Placement.ByBackend()["gorgonia"])
//
// or on the command line, exec -backend gorgonia. A kernel can also be run on
// its own; here y = x·wᵀ for x [1, 2, 3] and w [2, 3] (see Example):
//
//	x := ir.T(ir.F32, "B", 2, 3)
//	w := ir.T(ir.F32, 2, 3)
//	n := &ir.Node{Op: "matmul", Type: ir.T(ir.F32, "B", 2, 2),
//		Args: []*ir.Node{{Op: "input", Type: x}, {Op: "weight", Type: w}}}
//	be, _ := backends.Get("gorgonia")
//	fmt.Println(be.Capabilities().Supports(n)) // true
//	dev, _ := be.Open()
//	y, _ := backends.RunNode(dev, n, nil,
//		&backends.Tensor{DType: ir.F32, Shape: []int{1, 2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}},
//		&backends.Tensor{DType: ir.F32, Shape: []int{2, 3}, F32: []float32{1, 0, 0, 1, 1, 1}})
//	fmt.Println(y.Shape, y.F32)          // [1 2 2] [1 6 4 15]
//
// On the tiny checkpoint's decode graph (no passes) 1557 of 3392 nodes run on
// gorgonia (add_scalar×680, div×632, mul×90, add×64, matmul×27,
// mul_scalar×24, sigmoid×32, sqrt×8); a block-local golden run meets the
// golden tolerances (TestGoldenTinyGorgonia).
package gorgonia
