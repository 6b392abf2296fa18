package nodemanager

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/node/helpers"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// Event reasons (on the Node).
const (
	ReasonSynced     = "Synced"
	ReasonInitFailed = "NodeInitializationFailed"
)

// Syncer brings one Node in line with its Source.
type Syncer struct {
	Kube     kubernetes.Interface
	NodeName string
	Source   Source
	Init     nodes.InitOptions
	// WaitRoutes marks the node NetworkUnavailable while it is initialised (WaitForRoutes).
	WaitRoutes bool
	// Recorder, when set, gets the node's events.
	Recorder record.EventRecorder
	// Now is the clock of condition timestamps (default time.Now).
	Now func() time.Time
}

// Sync reads the Node, asks the source and writes what differs: status (addresses, the
// NetworkUnavailable condition) first, then labels, providerID and taints, so that nothing is
// scheduled on an untainted node before its addresses and network state are set.
func (s *Syncer) Sync(ctx context.Context) error {
	node, err := s.Kube.CoreV1().Nodes().Get(ctx, s.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s does not exist yet", s.NodeName)
	}
	if err != nil {
		return err
	}
	md, err := s.Source.Metadata(ctx, node)
	if err != nil {
		err = fmt.Errorf("reading the node's metadata from %s: %w", s.Source.Name(), err)
	} else if md.Addresses, err = providedNodeIPFirst(node, md.Addresses); err != nil {
		err = fmt.Errorf("the node's IP does not match its VM (%s): %w", s.Source.Name(), err)
	}
	if err != nil {
		if initialising(node) && s.Recorder != nil {
			s.Recorder.Eventf(node, v1.EventTypeWarning, ReasonInitFailed, "%v", err)
		}
		return err
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if node, err = s.Kube.CoreV1().Nodes().Get(ctx, s.NodeName, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		first = false
		if node.Spec.ProviderID != "" && md.ProviderID != "" && node.Spec.ProviderID != md.ProviderID {
			klog.ErrorS(nil, "The node's providerID differs from its VM's; leaving it", "node", s.NodeName,
				"providerID", node.Spec.ProviderID, "vmProviderID", md.ProviderID, "source", s.Source.Name())
		}
		wasInitialising := initialising(node)
		updated, specChanged, statusChanged := nodes.ApplyMetadata(node, md, s.Init)
		if s.WaitRoutes {
			// Decided on the Node as read: still tainted means still being initialised.
			if c, ok := WaitForRoutes(node, metav1.NewTime(now())); ok {
				setCondition(updated, c)
				statusChanged = true
				klog.InfoS("Node marked NetworkUnavailable until its routes exist", "node", s.NodeName)
			}
		}
		if statusChanged {
			st, err := s.Kube.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			updated.ResourceVersion = st.ResourceVersion
		}
		if specChanged {
			if _, err := s.Kube.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return err
			}
			klog.InfoS("Node updated", "node", s.NodeName, "source", s.Source.Name(), "providerID", updated.Spec.ProviderID,
				"zone", md.Zone, "region", md.Region, "instanceType", md.InstanceType)
			if wasInitialising && !initialising(updated) && s.Recorder != nil {
				s.Recorder.Eventf(updated, v1.EventTypeNormal, ReasonSynced, "Node initialised from %s", s.Source.Name())
			}
		}
		return nil
	})
}

// Run syncs at start, whenever trigger fires (changes of the Node) and every period. After a
// failure it retries with backoff from one second up to a minute (or period, if shorter).
func (s *Syncer) Run(ctx context.Context, trigger <-chan struct{}, period time.Duration) {
	const firstRetry = time.Second
	maxRetry := min(time.Minute, period)
	backoff := firstRetry
	for {
		next := period
		if err := s.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "Syncing node failed; retrying", "node", s.NodeName, "retryIn", backoff)
			next = backoff
			backoff = min(2*backoff, maxRetry)
		} else {
			backoff = firstRetry
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-trigger:
		case <-t.C:
		}
		t.Stop()
	}
}

// providedNodeIPFirst applies the kubelet's --node-ip (annotation
// alpha.kubernetes.io/provided-node-ip) as the cloud-node controller does: every IP named must
// be an address of the VM, else the node is not initialised (its taint stays); the matching
// addresses come first and replace the others of their type. Without the annotation the
// addresses are kept as they are.
func providedNodeIPFirst(node *v1.Node, addrs []v1.NodeAddress) ([]v1.NodeAddress, error) {
	ip, ok := node.Annotations[cloudproviderapi.AnnotationAlphaProvidedIPAddr]
	if !ok || len(addrs) == 0 {
		return addrs, nil
	}
	return helpers.GetNodeAddressesFromNodeIP(ip, addrs)
}
