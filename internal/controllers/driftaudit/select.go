package driftaudit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	servicehelper "k8s.io/cloud-provider/service/helpers"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// Skip reasons of a service that is not (or no longer) audited.
const (
	SkipGone        = "the service is gone"
	SkipRecreated   = "the service was deleted and created again (new UID)"
	SkipDeleting    = "the service is being deleted"
	SkipNotLB       = "the service is no longer of type LoadBalancer"
	SkipElsewhere   = "the service's loadBalancerClass is another controller's"
	SkipNoFinalizer = "the service has no load balancer cleanup finalizer (not yet, or no longer, served)"
	SkipNoIngress   = "the service has no load balancer ingress yet (still being provisioned)"
)

// Owned says why the CCM's service controller is not (or not yet) serving svc's load balancer,
// or "" when it is: type LoadBalancer, served here (no foreign loadBalancerClass), not being
// deleted, with the service controller's cleanup finalizer and an ingress (provisioned at least
// once). Only such services are audited, and a repair needs the live Service to pass too.
func Owned(svc *v1.Service) string {
	switch {
	case svc.DeletionTimestamp != nil:
		return SkipDeleting
	case svc.Spec.Type != v1.ServiceTypeLoadBalancer:
		return SkipNotLB
	case !plan.ServedHere(svc):
		return SkipElsewhere
	case !servicehelper.HasLBFinalizer(svc):
		return SkipNoFinalizer
	case len(svc.Status.LoadBalancer.Ingress) == 0:
		return SkipNoIngress
	}
	return ""
}

// Confirmed checks the live Service (nil: not found) against the one audited: it must be the
// same object (UID) and still owned. It returns "" or the reason not to repair.
func Confirmed(audited, live *v1.Service) string {
	switch {
	case live == nil:
		return SkipGone
	case live.UID != audited.UID:
		return SkipRecreated
	}
	return Owned(live)
}

// Fingerprint hashes what the load balancer planners read of the cluster: the audited services
// (UID, resourceVersion) and, of the nodes, what pool membership depends on (name, providerID,
// labels, taints, addresses, deletion) — not their status heartbeats, which change a node's
// resourceVersion every few minutes without changing any pool. azure is the Azure side's
// fingerprint (Auditor.Refresh).
func Fingerprint(azure string, svcs []*v1.Service, nodes []*v1.Node) string {
	h := sha256.New()
	io.WriteString(h, azure+"\n")
	keys := make([]string, 0, len(svcs))
	for _, s := range svcs {
		keys = append(keys, string(s.UID)+" "+s.ResourceVersion)
	}
	sort.Strings(keys)
	io.WriteString(h, strings.Join(keys, ",")+"\n")
	ns := append([]*v1.Node(nil), nodes...)
	sort.Slice(ns, func(i, j int) bool { return ns[i].Name < ns[j].Name })
	for _, n := range ns {
		fmt.Fprintf(h, "node %s %s %t %s %s %s\n", n.Name, n.Spec.ProviderID, n.DeletionTimestamp != nil,
			sortedMap(n.Labels), taints(n.Spec.Taints), addresses(n.Status.Addresses))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func sortedMap(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func taints(ts []v1.Taint) string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.Key+"="+t.Value+":"+string(t.Effect))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func addresses(as []v1.NodeAddress) string {
	out := make([]string, 0, len(as))
	for _, a := range as {
		out = append(out, string(a.Type)+"="+a.Address)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
