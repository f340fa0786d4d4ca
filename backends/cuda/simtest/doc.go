// Package simtest runs the cuda backend on driver.Simulate's driver (no
// GPU): what a decode step launches, what its graph replays and which of
// its nodes change from one step to the next. Its own test binary, so the
// simulated driver never stands in for a real one in the GPU tests.
package simtest
