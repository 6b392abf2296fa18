package loginhealth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestStepDown(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	bad := errors.New("the login server's TLS certificate is not trusted")
	cases := []struct {
		name  string
		now   time.Time
		err   error
		after time.Duration
		want  bool
	}{
		{"no error", t0.Add(time.Hour), nil, time.Minute, false},
		{"error shorter than the bound", t0.Add(59 * time.Second), bad, time.Minute, false},
		{"error as long as the bound", t0.Add(time.Minute), bad, time.Minute, true},
		{"error longer than the bound", t0.Add(time.Hour), bad, time.Minute, true},
		{"bound 0: never", t0.Add(time.Hour), bad, 0, false},
	}
	for _, c := range cases {
		if got := StepDown(c.now, t0, c.err, c.after); got != c.want {
			t.Errorf("%s: StepDown = %v, want %v", c.name, got, c.want)
		}
	}
}

// The check fails with the reason while the error lasts; Run exits once it has lasted the
// bound, and not before.
func TestCheckAndExit(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var since time.Time
	var lerr error
	exited := make(chan error, 1)
	c, err := New(Options{
		Misconfigured: func() (time.Time, error) { mu.Lock(); defer mu.Unlock(); return since, lerr },
		StepDownAfter: 2 * time.Minute, Period: time.Millisecond,
		Now:  func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		Exit: func(err error) { exited <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(nil); err != nil {
		t.Fatalf("Check with working logins: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)

	mu.Lock()
	since, lerr = now, errors.New("the login server refuses the credentials (invalid_client)")
	now = now.Add(90 * time.Second)
	mu.Unlock()
	if err := c.Check(nil); err == nil || !strings.Contains(err.Error(), "invalid_client") || !strings.Contains(err.Error(), "1m30s") {
		t.Fatalf("Check = %v, want the reason and how long", err)
	}
	// Before the bound: several periods pass without an exit.
	select {
	case err := <-exited:
		t.Fatalf("exited before the bound: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	mu.Lock()
	now = now.Add(30 * time.Second)
	mu.Unlock()
	select {
	case err := <-exited:
		if !strings.Contains(err.Error(), "standby") || !strings.Contains(err.Error(), "invalid_client") {
			t.Errorf("exit reason %q", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no exit after the bound")
	}
}
