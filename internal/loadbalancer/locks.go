package loadbalancer

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// serviceLocks are one lock per service UID, held while the service's Azure objects are
// written: by EnsureLoadBalancer, by the drift audit's repair and by EnsureLoadBalancerDeleted.
// The audit re-reads the Service from the API server under the lock before writing, so a
// deletion either completed before that read (the audit sees it and writes nothing) or waits
// for the audit's writes and removes them: a repair can never resurrect a deleted service.
// Services do not wait on each other.
type serviceLocks struct {
	mu    sync.Mutex
	locks map[types.UID]*serviceLock
}

type serviceLock struct {
	ch   chan struct{} // holds one token while locked
	refs int
}

func newServiceLocks() *serviceLocks { return &serviceLocks{locks: map[types.UID]*serviceLock{}} }

// lock takes uid's lock, or gives up when ctx ends. The returned function releases it.
func (s *serviceLocks) lock(ctx context.Context, uid types.UID) (func(), error) {
	s.mu.Lock()
	l, ok := s.locks[uid]
	if !ok {
		l = &serviceLock{ch: make(chan struct{}, 1)}
		s.locks[uid] = l
	}
	l.refs++
	s.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	case <-ctx.Done():
		s.release(uid, l)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-l.ch
			s.release(uid, l)
		})
	}, nil
}

func (s *serviceLocks) release(uid types.UID, l *serviceLock) {
	s.mu.Lock()
	if l.refs--; l.refs == 0 {
		delete(s.locks, uid)
	}
	s.mu.Unlock()
}

// held is the number of UIDs locked or waited for (tests).
func (s *serviceLocks) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}
