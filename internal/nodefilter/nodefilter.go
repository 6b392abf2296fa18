// Package nodefilter is --node-filter-requirements, the existing Azure provider's node filter:
// a label selector that restricts the nodes the CCM's controllers see. It is applied to the
// shared Node informer every controller and the provider read nodes from, and to the one-off
// node lists (the load balancer migrations, the plan command), so that they all agree on which
// nodes the CCM manages. Services, EndpointSlices and the other resources are not filtered.
package nodefilter

import (
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Flag is the flag's name.
const Flag = "node-filter-requirements"

// Parse reads the flag's value with the Kubernetes label selector syntax ("env=prod",
// "!maintenance", "tier in (a,b)", comma-separated requirements all apply). "" selects every node
// and returns nil.
func Parse(s string) (labels.Selector, error) {
	if s == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", Flag, s, err)
	}
	if sel.Empty() {
		return nil, nil
	}
	return sel, nil
}

// String is sel as a list option's label selector ("" for nil: every node).
func String(sel labels.Selector) string {
	if sel == nil {
		return ""
	}
	return sel.String()
}

// ListOptions are the options of a node LIST that sees what the filtered informer sees.
func ListOptions(sel labels.Selector) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: String(sel)}
}

// Install makes f's Node informer list and watch only the nodes sel matches: a node that stops
// matching is deleted from the cache (the controllers see it go, as if it had been deleted),
// one that starts matching is added. It must run before anything asks f for the Node informer;
// a nil sel changes nothing.
func Install(f informers.SharedInformerFactory, sel labels.Selector) error {
	if sel == nil {
		return nil
	}
	selector := sel.String()
	installed := false
	f.InformerFor(&v1.Node{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		installed = true
		// The indexers of the factory's own Node informer, so that listers behave the same.
		return coreinformers.NewFilteredNodeInformer(c, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) { o.LabelSelector = selector })
	})
	if !installed {
		return errors.New("the node informer already exists: the node filter cannot apply")
	}
	return nil
}
