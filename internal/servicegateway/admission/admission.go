// Package admission decides, without I/O, what container-based load balancing makes of a
// Service: the load balancer spec it gets, the options it cannot honour (each named, so the
// user sees which one in an event) and the ready pod addresses the gateway must list.
package admission

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/servicegateway/updater"
)

// Annotations read here (the existing provider's names).
const (
	AnnotationInternal    = "service.beta.kubernetes.io/azure-load-balancer-internal"
	AnnotationIdleTimeout = "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout"
	annotationPrefix      = "service.beta.kubernetes.io/azure-"
	// EgressLabel marks egress pods; its value is the egress identity.
	EgressLabel = "kubernetes.azure.com/service-egress-gateway"
	// LoadBalancerClass of services served by this CCM (none set also means this CCM).
	LoadBalancerClass = "azure"
)

// Result is the admission of one Service.
type Result struct {
	// Wanted: the service should have gateway resources (type LoadBalancer, ours, not deleting).
	Wanted bool
	// Rejected names the options that prevent provisioning (the service is left as it is).
	Rejected []string
	// Ignored names the options that have no effect in this mode (provisioned anyway).
	Ignored []string
	// Pending says why the spec cannot be built yet (named target port not yet resolved).
	Pending string
	Spec    updater.InboundSpec
}

// Wants reports whether the Service is a LoadBalancer Service this CCM serves.
func Wants(svc *v1.Service) bool {
	return svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.DeletionTimestamp == nil &&
		(svc.Spec.LoadBalancerClass == nil || *svc.Spec.LoadBalancerClass == LoadBalancerClass)
}

// Admit builds the spec of a Service. eps are its EndpointSlices (named target ports are
// resolved from them).
func Admit(svc *v1.Service, eps []*discoveryv1.EndpointSlice) Result {
	r := Result{Wanted: Wants(svc)}
	if !r.Wanted {
		return r
	}
	if strings.EqualFold(svc.Annotations[AnnotationInternal], "true") {
		r.Rejected = append(r.Rejected, AnnotationInternal+" (internal load balancers)")
	}
	if svc.Spec.LoadBalancerIP != "" {
		r.Rejected = append(r.Rejected, "spec.loadBalancerIP")
	}
	if len(svc.Spec.IPFamilies) > 1 {
		r.Rejected = append(r.Rejected, "spec.ipFamilies (dual-stack)")
	}
	r.Spec.IPv6 = len(svc.Spec.IPFamilies) == 1 && svc.Spec.IPFamilies[0] == v1.IPv6Protocol
	r.Spec.SourceIPAffinity = svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	r.Spec.IdleTimeoutMinutes = 4
	if v, ok := svc.Annotations[AnnotationIdleTimeout]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 4 || n > 100 {
			r.Rejected = append(r.Rejected, fmt.Sprintf("%s=%q (must be 4–100 minutes)", AnnotationIdleTimeout, v))
		} else {
			r.Spec.IdleTimeoutMinutes = int32(n)
		}
	}
	for k := range svc.Annotations {
		if strings.HasPrefix(k, annotationPrefix) && k != AnnotationInternal && k != AnnotationIdleTimeout {
			r.Ignored = append(r.Ignored, k)
		}
	}
	slices.Sort(r.Ignored)
	seen := map[string]string{}
	for _, p := range svc.Spec.Ports {
		proto := "Tcp"
		switch p.Protocol {
		case v1.ProtocolTCP, "":
		case v1.ProtocolUDP:
			proto = "Udp"
		default:
			r.Rejected = append(r.Rejected, fmt.Sprintf("spec.ports[%s].protocol %s", portName(p), p.Protocol))
			continue
		}
		backend := p.Port
		switch {
		case p.TargetPort.Type == intstr.String:
			n, ok, conflict := resolveNamed(p, eps)
			if conflict {
				r.Rejected = append(r.Rejected, fmt.Sprintf("spec.ports[%s].targetPort %q (resolves to different ports on different pods)", portName(p), p.TargetPort.StrVal))
				continue
			}
			if !ok {
				r.Pending = fmt.Sprintf("named target port %q not resolved yet (no ready endpoints)", p.TargetPort.StrVal)
				continue
			}
			backend = n
		case p.TargetPort.IntVal != 0:
			backend = p.TargetPort.IntVal
		}
		key := fmt.Sprintf("%s/%d", proto, backend)
		if other, dup := seen[key]; dup {
			r.Rejected = append(r.Rejected, fmt.Sprintf("spec.ports[%s] and spec.ports[%s] (same protocol and target port %d)", other, portName(p), backend))
			continue
		}
		seen[key] = portName(p)
		r.Spec.Ports = append(r.Spec.Ports, updater.Port{Protocol: proto, FrontendPort: p.Port, BackendPort: backend})
	}
	return r
}

func portName(p v1.ServicePort) string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(int(p.Port))
}

// resolveNamed finds the number a named target port resolves to in the EndpointSlices (the
// endpoint slice controller writes one port per service port name).
func resolveNamed(p v1.ServicePort, eps []*discoveryv1.EndpointSlice) (port int32, ok, conflict bool) {
	for _, s := range eps {
		for _, sp := range s.Ports {
			if sp.Port == nil || deref(sp.Name) != p.Name {
				continue
			}
			if ok && *sp.Port != port {
				return 0, false, true
			}
			port, ok = *sp.Port, true
		}
	}
	return port, ok, false
}

// Members are the ready pod addresses of a Service: pod address → the node address of the
// same family (nodeIPs: node name → its InternalIPs). Endpoints without a node or a node
// address of their family are left out.
func Members(eps []*discoveryv1.EndpointSlice, nodeIPs map[string][]string) map[string]string {
	out := map[string]string{}
	for _, s := range eps {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			if e.NodeName == nil {
				continue
			}
			for _, a := range e.Addresses {
				pod, err := netip.ParseAddr(a)
				if err != nil {
					continue
				}
				if node := sameFamily(pod, nodeIPs[*e.NodeName]); node != "" {
					out[pod.String()] = node
				}
			}
		}
	}
	return out
}

// EgressMembers are the addresses of the egress pods of one identity: running or pending,
// not deleting, with a host address of the pod address's family.
func EgressMembers(pods []*v1.Pod) map[string]string {
	out := map[string]string{}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || (p.Status.Phase != v1.PodRunning && p.Status.Phase != v1.PodPending) {
			continue
		}
		var hosts []string
		for _, h := range p.Status.HostIPs {
			hosts = append(hosts, h.IP)
		}
		if len(hosts) == 0 && p.Status.HostIP != "" {
			hosts = []string{p.Status.HostIP}
		}
		ips := []string{}
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = []string{p.Status.PodIP}
		}
		for _, ip := range ips {
			pod, err := netip.ParseAddr(ip)
			if err != nil {
				continue
			}
			if node := sameFamily(pod, hosts); node != "" {
				out[pod.String()] = node
			}
		}
	}
	return out
}

// EgressIdentity is the lower-case egress identity of a pod ("" if none or invalid).
func EgressIdentity(p *v1.Pod) (id string, valid bool) {
	v, ok := p.Labels[EgressLabel]
	if !ok {
		return "", false
	}
	v = strings.ToLower(v)
	if v == "" || v == updater.ReservedEgress || len(v) > 80 {
		return v, false
	}
	for i, c := range v {
		alnum := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
		if !alnum && (i == 0 || i == len(v)-1 || !strings.ContainsRune("._-", c)) {
			return v, false
		}
	}
	return v, true
}

func sameFamily(a netip.Addr, candidates []string) string {
	for _, c := range candidates {
		n, err := netip.ParseAddr(c)
		if err == nil && n.Is4() == a.Is4() {
			return n.String()
		}
	}
	return ""
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
