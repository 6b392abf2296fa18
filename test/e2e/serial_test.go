package e2e

import (
	"testing"
	"time"
)

// working holds one token: the working test that has it runs beside the waiting tests but
// never beside another working test (see doc.go).
var working = make(chan struct{}, 1)

// serial marks a test that works rather than waits. It runs in the parallel phase, so that
// the waiting tests' timers overlap it, one working test at a time as if it ran sequentially;
// the token is handed on after every cleanup of the test (its cluster's teardown included).
// go test's duration of such a test includes its wait for the token, which it logs.
func serial(t *testing.T) {
	t.Helper()
	t.Parallel()
	start := time.Now()
	working <- struct{}{}
	t.Logf("ran after %s waiting for its turn among the working tests", time.Since(start).Round(time.Second))
	t.Cleanup(func() { <-working })
}
