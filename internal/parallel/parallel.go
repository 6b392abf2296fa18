// Package parallel runs a batch of independent calls with bounded concurrency and keeps every
// call's error.
package parallel

import (
	"context"

	"k8s.io/client-go/util/workqueue"
)

// Do calls fn for every index in [0, n), at most workers at a time (at least one), and returns
// each call's error by index: nil where fn succeeded. Every index is called even after ctx is
// done — fn gets ctx and fails fast on its own — so a caller never mistakes a call that did not
// run for one that succeeded.
func Do(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) []error {
	errs := make([]error, n)
	// ParallelizeUntil stops handing out pieces once its context is done; WithoutCancel keeps
	// the promise above.
	workqueue.ParallelizeUntil(context.WithoutCancel(ctx), max(workers, 1), n, func(i int) {
		errs[i] = fn(ctx, i)
	})
	return errs
}
