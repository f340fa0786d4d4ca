package ir_test

import (
	"fmt"

	"github.com/ds4go/ds4/ir"
)

func ExampleFormat() {
	g := ir.NewGraph("prefill")
	x := g.Source("input", ir.T(ir.BF16, "B", "S", 64), ir.Attrs{"name": "x"})
	w := g.Source("weight", ir.T(ir.BF16, 128, 64), ir.Attrs{"name": "w", "format": "bf16"})
	y := g.Add("matmul", nil, x, w)
	g.SetOutput("y", y)
	fmt.Print(ir.Format(&ir.Module{Graphs: []*ir.Graph{g}}))
	// Output:
	// module {
	// }
	// graph prefill {
	//   %0 = input {name="x"} : bf16[B,S,64]
	//   %1 = weight {format="bf16", name="w"} : bf16[128,64]
	//   %2 = matmul(%0, %1) : bf16[B,S,128]
	//   output y = %2
	// }
}
