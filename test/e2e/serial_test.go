package e2e

import "testing"

// working holds one token: the working test that has it runs beside the waiting tests but
// never beside another working test (see doc.go).
var working = make(chan struct{}, 1)

// serial marks a test that works rather than waits. It runs in the parallel phase, so that
// the waiting tests' timers overlap it, one working test at a time as if it ran sequentially;
// the token is handed on after every cleanup of the test (its cluster's teardown included).
func serial(t *testing.T) {
	t.Helper()
	t.Parallel()
	working <- struct{}{}
	t.Cleanup(func() { <-working })
}
