package adminstate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRoundEndsWithTheController: a round's write runs on the controller's lifetime. A waiter
// giving up does not end it (other waiters may have joined); the controller stopping does.
func TestRoundEndsWithTheController(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	defer stop()
	started := make(chan struct{})
	var once sync.Once
	ended := make(chan error, 1)
	// The write's mutation runs, then its PUT waits for the context.
	f := &flusher{life: life, run: func(ctx context.Context, _ []poolRef, applied func()) error {
		applied()
		once.Do(func() { close(started) })
		<-ctx.Done()
		select { // a later round (the second waiter may join only after the stop) ends at once
		case ended <- ctx.Err():
		default:
		}
		return ctx.Err()
	}}

	impatient, giveUp := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- f.wait(impatient, time.Now()) }()
	<-started
	second := make(chan error, 1)
	go func() { second <- f.wait(context.Background(), time.Now().Add(-time.Hour)) }()

	giveUp()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter that gave up got %v, want context.Canceled", err)
	}
	select {
	case err := <-ended:
		t.Fatalf("the round ended (%v) when its first waiter gave up", err)
	case err := <-second:
		t.Fatalf("the second waiter returned (%v) while the round was running", err)
	default:
	}

	stop()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the round's write saw %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second): // a deadlock guard, not a speed goal
		t.Fatal("the round's write still runs after the controller stopped")
	}
	if err := <-second; !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiter still in the round got %v, want the round's context.Canceled", err)
	}
}
