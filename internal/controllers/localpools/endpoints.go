// Package localpools keeps the dedicated backend pools of externalTrafficPolicy: Local services
// (multiple Standard load balancers) in step with their endpoints. EndpointSlice
// changes mark a service's pool dirty; every loadBalancerBackendPoolUpdateIntervalInSeconds the
// dirty pools are flushed, each with the full desired member set computed from all EndpointSlices
// of the service and diffed against Azure (level-triggered: a lost event or a failed flush is
// repaired by the next one). Flushes start only after the informers have synced, failed ones are
// retried with backoff, and every write goes through the load balancer's writer, the one the
// service reconcile uses, so the two never race.
package localpools

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
)

// EndpointNodes names the nodes hosting ready endpoints of a service from the EndpointSlice
// cache; ok is false until every informer in synced has synced (the service reconcile then puts
// every eligible node in a Local pool rather than none).
func EndpointNodes(slices discoverylisters.EndpointSliceLister, synced ...cache.InformerSynced) multislb.EndpointNodesFunc {
	return func(namespace, name string) ([]string, bool) {
		for _, s := range synced {
			if !s() {
				return nil, false
			}
		}
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
		eps, err := slices.EndpointSlices(namespace).List(sel)
		if err != nil {
			return nil, false
		}
		return ReadyNodes(eps), true
	}
}

// ReadyNodes are the nodes (sorted, unique) hosting ready, non-terminating endpoints in the
// slices of one service. A nil Ready condition counts as ready, as the API documents.
func ReadyNodes(eps []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range eps {
		if s == nil {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			c := ep.Conditions
			if (c.Ready != nil && !*c.Ready) || (c.Terminating != nil && *c.Terminating) {
				continue
			}
			if !slices.Contains(out, *ep.NodeName) {
				out = append(out, *ep.NodeName)
			}
		}
	}
	slices.Sort(out)
	return out
}
