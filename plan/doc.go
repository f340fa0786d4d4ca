// Package plan reads and writes the compiled artifact that `compile` writes
// and `exec` runs: a versioned, self-describing file holding the verified
// graphs (docs/plan-format.md).
//
//	p := &plan.Plan{ConfigFingerprint: fp, Module: m}
//	err := plan.Write("model.plan", p)
//	q, err := plan.Read("model.plan")
package plan
