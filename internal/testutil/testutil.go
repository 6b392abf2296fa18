// Package testutil holds what the tests of several packages share: waiting for a condition
// instead of sleeping. Only tests import it (TestOnlyTestsImportIt).
package testutil

import (
	"errors"
	"testing"
	"time"
)

// Timeout bounds every wait. It only matters when the condition never holds, so it is long:
// a loaded machine running tests with -race is slow.
const Timeout = time.Minute

// maxInterval caps the pause between two checks of a condition.
const maxInterval = 20 * time.Millisecond

// WaitFor checks cond until it holds and fails t, naming what it waited for, if it has not
// within Timeout. The checks start 1 ms apart and back off to 20 ms.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Eventually(t, what, func() error {
		if cond() {
			return nil
		}
		return errors.New("the condition does not hold")
	})
}

// Eventually is WaitFor for a condition that says why it does not hold yet: it holds when
// cond returns nil, and the failure shows the last error.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	eventually(t, what, Timeout, cond)
}

func eventually(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := poll(timeout, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
}

// poll checks cond until it returns nil or timeout passes, and returns cond's last error.
func poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	interval := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
		interval = min(2*interval, maxInterval)
	}
}
