// Package workpool runs the parallel loops of the CPU backend (the fast
// kernels and the reference kernels' parallelRange) on persistent helper
// goroutines, so that the many small parallel sections of a decode step do
// not each pay for starting goroutines and waking parked threads.
package workpool
