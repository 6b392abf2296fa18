package framework

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metaGet = metav1.GetOptions{}

// Condition is polled until it returns true. An error means "not yet"; the last one is
// reported if the condition never holds.
type Condition func(ctx context.Context) (bool, error)

// poll runs cond every interval until it holds or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond Condition) error {
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		// The poll the deadline cuts short fails with the context's error: keep the one before,
		// which says why the condition did not hold.
		if err != nil && (ctx.Err() == nil || last == nil) {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
			}
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// Eventually waits up to timeout for cond and returns an error if it never held.
func (e *Env) Eventually(cond Condition, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return poll(ctx, 250*time.Millisecond, cond)
}

// WaitFor waits up to timeout for cond and fails the test if it never held. what describes
// the condition in the failure message.
func (e *Env) WaitFor(what string, cond Condition, timeout time.Duration) {
	e.T.Helper()
	began := time.Now()
	if err := e.Eventually(cond, timeout); err != nil {
		e.T.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
	e.T.Logf("framework: %s after %s", what, time.Since(began).Round(time.Millisecond))
}

// DefaultServiceAccount holds when the namespace's "default" ServiceAccount exists. The
// kube-controller-manager creates it after the namespace, and until then the API server refuses
// a pod that does not name another one ("serviceaccount \"default\" not found"): on a busy
// machine a test can get there first, so wait for it before creating such pods.
func (e *Env) DefaultServiceAccount(namespace string) Condition {
	return func(ctx context.Context) (bool, error) {
		if _, err := e.Kube.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metaGet); err != nil {
			return false, err
		}
		return true, nil
	}
}

// PodRunning holds when the pod is Running on some node.
func (e *Env) PodRunning(namespace, name string) Condition {
	return func(ctx context.Context) (bool, error) {
		p, err := e.Kube.CoreV1().Pods(namespace).Get(ctx, name, metaGet)
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
			return false, fmt.Errorf("pod %s/%s is %s on %q", namespace, name, p.Status.Phase, p.Spec.NodeName)
		}
		return true, nil
	}
}

// NodeReady holds when the node's Ready condition is True.
func (e *Env) NodeReady(name string) Condition {
	return func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metaGet)
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Errorf("node %s Ready=%s", name, c.Status)
			}
		}
		return false, fmt.Errorf("node %s has no Ready condition", name)
	}
}

// NodeInitialized holds when the CCM has removed the uninitialized taint from the node.
func (e *Env) NodeInitialized(name string) Condition {
	return func(ctx context.Context) (bool, error) {
		n, err := e.Kube.CoreV1().Nodes().Get(ctx, name, metaGet)
		if err != nil {
			return false, err
		}
		for _, t := range n.Spec.Taints {
			if t.Key == UninitializedTaintKey {
				return false, fmt.Errorf("node %s still has taint %s", name, UninitializedTaintKey)
			}
		}
		return true, nil
	}
}

// ServiceIngress holds when the service has a load-balancer ingress IP.
func (e *Env) ServiceIngress(namespace, name string) Condition {
	return func(ctx context.Context) (bool, error) {
		s, err := e.Kube.CoreV1().Services(namespace).Get(ctx, name, metaGet)
		if err != nil {
			return false, err
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				return true, nil
			}
		}
		return false, fmt.Errorf("service %s/%s has no ingress IP yet", namespace, name)
	}
}
