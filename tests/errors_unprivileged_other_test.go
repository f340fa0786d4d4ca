//go:build !unix

package tests

import "testing"

// errsRunUnprivileged is errsRun where there is no root to drop.
func errsRunUnprivileged(t *testing.T, fx *errsFixture, dir, name string, args ...string) errsResult {
	t.Helper()
	return errsRun(t, fx, dir, name, args...)
}
