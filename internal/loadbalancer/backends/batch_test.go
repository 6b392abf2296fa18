package backends

import (
	"sync"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
)

func TestScaleSetVMBatch(t *testing.T) {
	for _, tc := range []struct{ configured, want int }{{0, 1}, {-3, 1}, {1, 1}, {5, 5}} {
		if got := scaleSetVMBatch(tc.configured); got != tc.want {
			t.Errorf("putVMSSVMBatchSize %d: %d at a time, want %d", tc.configured, got, tc.want)
		}
	}
}

// runEdits holds each kind to its own limit and reaches it: every call waits until its kind has
// limit calls in flight (so a lower bound hangs and fails), and a call past the limit is seen.
func TestRunEdits(t *testing.T) {
	limits := map[membership.Kind]int{membership.KindScaleSetVM: 3, membership.KindNIC: 4}
	var edits []membership.Edit
	for range 6 {
		edits = append(edits, membership.Edit{Kind: membership.KindScaleSetVM})
	}
	for range 8 {
		edits = append(edits, membership.Edit{Kind: membership.KindNIC})
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		inFlight = map[membership.Kind]int{}
		entered  = map[membership.Kind]int{}
		peak     = map[membership.Kind]int{}
	)
	deadline := time.Now().Add(10 * time.Second)
	go func() { // wakes the waiters at the deadline so a failure is reported, not hung
		time.Sleep(time.Until(deadline))
		cond.Broadcast()
	}()
	runEdits(edits, func(k membership.Kind) int { return limits[k] }, func(e membership.Edit) {
		mu.Lock()
		defer mu.Unlock()
		inFlight[e.Kind]++
		entered[e.Kind]++
		peak[e.Kind] = max(peak[e.Kind], inFlight[e.Kind])
		cond.Broadcast()
		// Each round of limit calls leaves together once all of that round have entered.
		round := (entered[e.Kind] + limits[e.Kind] - 1) / limits[e.Kind]
		for entered[e.Kind] < round*limits[e.Kind] && time.Now().Before(deadline) {
			cond.Wait()
		}
		inFlight[e.Kind]--
	})
	for k, l := range limits {
		if peak[k] != l {
			t.Errorf("%s: at most %d at a time, want exactly %d", k, peak[k], l)
		}
	}
}
