// Package atomicfile writes files so that a reader never sees a partial one:
// plans, dumps, traces and IR dumps all go through it.
//
//	err := atomicfile.Write("model.plan", data)
package atomicfile
