// Package keyqueue is the work loop the CCM's own controllers share: informer handlers add keys
// to a rate-limited queue, workers take one key at a time and sync the whole desired state of
// that key, and a failed sync is retried with per-key exponential backoff until it succeeds. A
// key added again while it is being synced is synced once more afterwards, never twice at once.
package keyqueue

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// Options configure New.
type Options[K comparable] struct {
	// Name names the queue (its workqueue metrics).
	Name string
	// RetryBase and RetryMax bound a failing key's backoff (default 1s and 5m).
	RetryBase, RetryMax time.Duration
	// Sync brings one key to its desired state; an error retries it with backoff.
	Sync func(ctx context.Context, k K) error
	// Failed is told of each failed sync before its retry is queued, with the number of retries
	// that came before (to log it). Optional.
	Failed func(k K, err error, retries int)
}

// Queue is a rate-limited queue of keys and the workers that sync them.
type Queue[K comparable] struct {
	o Options[K]
	q workqueue.TypedRateLimitingInterface[K]
}

// New returns a queue; Start runs its workers.
func New[K comparable](o Options[K]) *Queue[K] {
	if o.RetryBase <= 0 {
		o.RetryBase = time.Second
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 5 * time.Minute
	}
	return &Queue[K]{o: o, q: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[K](o.RetryBase, o.RetryMax),
		workqueue.TypedRateLimitingQueueConfig[K]{Name: o.Name})}
}

// Add queues k (once, however often it is added before a worker takes it).
func (q *Queue[K]) Add(k K) { q.q.Add(k) }

// Len is the number of keys waiting.
func (q *Queue[K]) Len() int { return q.q.Len() }

// Start runs workers that sync keys until ctx ends, then shuts the queue down. It returns at
// once.
func (q *Queue[K]) Start(ctx context.Context, workers int) {
	for range max(workers, 1) {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for q.next(ctx) {
			}
		}, time.Second)
	}
	go func() {
		<-ctx.Done()
		q.q.ShutDown()
	}()
}

// ShutDown stops the queue: workers finish the keys they hold and exit.
func (q *Queue[K]) ShutDown() { q.q.ShutDown() }

// next syncs one key; false once the queue is shut down.
func (q *Queue[K]) next(ctx context.Context) bool {
	k, quit := q.q.Get()
	if quit {
		return false
	}
	defer q.q.Done(k)
	if err := q.o.Sync(ctx, k); err != nil {
		if q.o.Failed != nil {
			q.o.Failed(k, err, q.q.NumRequeues(k))
		}
		q.q.AddRateLimited(k)
		return true
	}
	q.q.Forget(k)
	return true
}
