package driftaudit

import (
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

// Released reports whether a service (nil: not found) uses no public IP any more: it is gone,
// or it neither asks for a load balancer served here nor waits for its cleanup (the service
// controller's finalizer, which it adds before it provisions anything). A service being
// provisioned or deleted still uses its public IPs.
func Released(s *v1.Service) bool {
	switch {
	case s == nil:
		return true
	case servicehelper.HasLBFinalizer(s):
		return false
	}
	return s.DeletionTimestamp != nil || s.Spec.Type != v1.ServiceTypeLoadBalancer || !plan.ServedHere(s)
}
