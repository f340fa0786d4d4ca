package gorgonia_test

import (
	"fmt"

	"github.com/ds4go/ds4/backends"
	_ "github.com/ds4go/ds4/backends/gorgonia"
	"github.com/ds4go/ds4/ir"
)

// Example runs one matmul node, y = x·wᵀ, on the gorgonia backend.
func Example() {
	x := ir.T(ir.F32, "B", 2, 3)
	w := ir.T(ir.F32, 2, 3)
	n := &ir.Node{Op: "matmul", Type: ir.T(ir.F32, "B", 2, 2),
		Args: []*ir.Node{{Op: "input", Type: x}, {Op: "weight", Type: w}}}
	be, err := backends.Get("gorgonia")
	if err != nil {
		panic(err)
	}
	fmt.Println(be.Capabilities().Supports(n))
	dev, err := be.Open()
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	y, err := backends.RunNode(dev, n, nil,
		&backends.Tensor{DType: ir.F32, Shape: []int{1, 2, 3}, F32: []float32{1, 2, 3, 4, 5, 6}},
		&backends.Tensor{DType: ir.F32, Shape: []int{2, 3}, F32: []float32{1, 0, 0, 1, 1, 1}})
	if err != nil {
		panic(err)
	}
	fmt.Println(y.Shape, y.F32)

	// A bf16 matmul is declined; the scheduler runs it on the fallback (cpu).
	n.Type.DType, n.Args[0].Type.DType, n.Args[1].Type.DType = ir.BF16, ir.BF16, ir.BF16
	fmt.Println(be.Capabilities().Supports(n))
	// Output:
	// true
	// [1 2 2] [1 6 4 15]
	// false
}
