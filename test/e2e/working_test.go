package e2e

import (
	"testing"
	"time"
)

// workingTurns holds the tokens of working tests: two run beside each other and beside the
// waiting tests, never more (see doc.go).
var workingTurns = make(chan struct{}, 2)

// working marks a test that works rather than waits. It runs in the parallel phase, so that
// the waiting tests' timers overlap it, at most two working tests at a time; its token is handed
// on after every cleanup of the test (its cluster's teardown included).
// go test's duration of such a test includes its wait for the token, which it logs.
func working(t *testing.T) {
	t.Helper()
	t.Parallel()
	start := time.Now()
	workingTurns <- struct{}{}
	t.Logf("ran after %s waiting for its turn among the working tests", time.Since(start).Round(time.Second))
	t.Cleanup(func() { <-workingTurns })
}
