//go:build bench

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// createNodes registers the machines' nodes, 16 at a time.
func (b *bench) createNodes(ms []framework.Machine) {
	b.parallel(len(ms), func(ctx context.Context, i int) error {
		_, err := b.env.Kube.CoreV1().Nodes().Create(ctx, framework.NewNode(ms[i], framework.NodeOptions{ProviderID: true}), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// deleteNodes deletes the machines' nodes, 16 at a time.
func (b *bench) deleteNodes(ms []framework.Machine) {
	b.parallel(len(ms), func(ctx context.Context, i int) error {
		err := b.env.Kube.CoreV1().Nodes().Delete(ctx, ms[i].NodeName, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// parallel runs f(0..n-1) with 16 workers and fails the test on the first error.
func (b *bench) parallel(n int, f func(ctx context.Context, i int) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.t.Fatal(first)
	}
}

// waitPool waits until the cluster's nodeIP pool holds every address of in and none of out,
// each with an admin state accepted by state (nil accepts any), and returns the time since
// began.
func (b *bench) waitPool(what string, in, out []framework.Machine, state func(string) bool, began time.Time, timeout time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		addrs, err := b.poolAddresses(ctx, "kubernetes", "kubernetes")
		ok := err == nil
		missing, extra := 0, 0
		for _, m := range in {
			st, found := addrs[m.InternalIPs[0]]
			if !found || (state != nil && !state(st)) {
				missing++
			}
		}
		for _, m := range out {
			if _, found := addrs[m.InternalIPs[0]]; found {
				extra++
			}
		}
		if ok && missing == 0 && extra == 0 {
			return time.Since(began)
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("%s: %d addresses missing, %d still present (%v)", what, missing, extra, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func batches(ms []framework.Machine, size int) [][]framework.Machine {
	var out [][]framework.Machine
	for len(ms) > 0 {
		n := min(size, len(ms))
		out = append(out, ms[:n])
		ms = ms[n:]
	}
	return out
}

func describeBatch(i int, ms []framework.Machine) string {
	return fmt.Sprintf("batch %d (%s…%s)", i+1, ms[0].NodeName, ms[len(ms)-1].NodeName)
}
