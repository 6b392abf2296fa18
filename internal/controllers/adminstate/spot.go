package adminstate

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate/planner"
	"github.com/azure-ccm/azure-ccm/internal/trim"
)

// ReasonPreemptScheduled is the reason of the event announcing a Spot VM eviction.
const ReasonPreemptScheduled = "PreemptScheduled"

// SpotTaintEffect is the effect of the draining taint the controller adds: no new pods; the
// node's existing pods are left to the eviction itself.
const SpotTaintEffect = v1.TaintEffectNoSchedule

// EventsInformer watches only PreemptScheduled events of nodes (a server-side field selector:
// the controller never lists the cluster's other events).
func EventsInformer(kube kubernetes.Interface, resync time.Duration) (informers.SharedInformerFactory, coreinformers.EventInformer) {
	f := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTransform(trim.Object), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.AndSelectors(
			fields.OneTermEqualSelector("reason", ReasonPreemptScheduled),
			fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		).String()
	}))
	return f, f.Core().V1().Events()
}

func eventTime(e *v1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
			return e.Series.LastObservedTime.Time
		}
		return e.EventTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// eventChanged queues a PreemptScheduled event of a node for the workers to judge.
func (c *Controller) eventChanged(e *v1.Event) {
	if e.Reason != ReasonPreemptScheduled || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name == "" {
		return
	}
	c.queue.Add(key{Event: e.Namespace + "/" + e.Name})
}

// judgeEvent reads a queued event from the cache (gone: nothing to do) and judges it.
func (c *Controller) judgeEvent(nsName string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(nsName)
	if err != nil {
		return nil //nolint:nilerr // not a key this controller made: nothing to retry
	}
	e, err := c.events.Events(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	c.eventSeen(e)
	return nil
}

// eventSeen decides whether a PreemptScheduled event is the first for its node. Only the first
// one taints; duplicates are ignored until the node is recreated (new UID) or the taint is
// cleared.
func (c *Controller) eventSeen(e *v1.Event) {
	if e.Reason != ReasonPreemptScheduled || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name == "" {
		return
	}
	at := eventTime(e)
	if c.o.Now().Sub(at) > c.o.MaxEventAge {
		preemptEvents.WithLabelValues("stale").Inc()
		return
	}
	n, err := c.nodes.Get(e.InvolvedObject.Name)
	if err != nil || (e.InvolvedObject.UID != "" && e.InvolvedObject.UID != n.UID) {
		// Unknown node, or an event about a previous node of that name.
		preemptEvents.WithLabelValues("unknown_node").Inc()
		return
	}
	c.mu.Lock()
	st := c.stateLocked(n)
	result := ""
	switch {
	case st.spotActed:
		result = "duplicate"
	case !st.spotClearedAt.IsZero() && !at.After(st.spotClearedAt):
		result = "stale" // seen before the taint was cleared
	case planner.HasSpotTaint(n):
		st.spotActed = true
		result = "already_tainted"
	default:
		st.spotActed = true
		st.spotEventAt = at
	}
	c.mu.Unlock()
	if result != "" {
		preemptEvents.WithLabelValues(result).Inc()
		klog.V(4).InfoS("PreemptScheduled event ignored", "node", n.Name, "result", result, "event", e.Name)
		return
	}
	klog.InfoS("PreemptScheduled event: tainting node as draining", "node", n.Name, "event", e.Namespace+"/"+e.Name)
	c.queue.Add(key{Node: n.Name, Spot: true})
}

// syncSpot adds the draining=spot-eviction taint (once; the node informer then drives the
// admin state like any other draining taint).
func (c *Controller) syncSpot(ctx context.Context, name string) error {
	start := time.Now()
	tainted := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.o.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if planner.HasSpotTaint(n) {
			return nil
		}
		n = n.DeepCopy()
		n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: planner.TaintDraining, Value: planner.TaintDrainingSpotEviction, Effect: SpotTaintEffect,
			TimeAdded: &metav1.Time{Time: c.o.Now()}})
		if _, err := c.o.Kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			return err
		}
		tainted = true
		if c.o.Recorder != nil {
			c.o.Recorder.Eventf(n, v1.EventTypeNormal, ReasonTainted, "PreemptScheduled: added taint %s=%s:%s so the node's backend entries go admin state Down",
				planner.TaintDraining, planner.TaintDrainingSpotEviction, SpotTaintEffect)
		}
		return nil
	})
	latency.WithLabelValues("taint_node").Observe(time.Since(start).Seconds())
	if apierrors.IsNotFound(err) {
		return nil // the node is gone: nothing to drain
	}
	if err != nil {
		operations.WithLabelValues("taint_node", "error").Inc()
		errorsTotal.WithLabelValues("taint_node", "0").Inc()
		return fmt.Errorf("tainting node %s after PreemptScheduled: %w", name, err)
	}
	if tainted {
		operations.WithLabelValues("taint_node", "success").Inc()
		preemptEvents.WithLabelValues("tainted").Inc()
	} else {
		operations.WithLabelValues("taint_node", "unchanged").Inc()
	}
	return nil
}
