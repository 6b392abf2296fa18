// Package plan holds the pure planners of LoadBalancer services: from a service (with its parsed
// annotations), the cluster settings and the current Azure models, they compute the desired load
// balancer, public IPs and NSG rules. No I/O: every function edits or returns SDK model structs and
// is driven by table tests. The functions are written as mutations for the group-commit writers:
// each one changes only what the given service (or this cluster) owns.
package plan

import (
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

// Cluster are the azure.json settings the planners need.
type Cluster struct {
	SubscriptionID string
	// ResourceGroup holds the load balancers (loadBalancerResourceGroup, else resourceGroup).
	ResourceGroup string
	Location      string
	// ClusterName (--cluster-name) names backend pools and public IPs and fills the cluster tag.
	ClusterName string
	// LBNamePrefix is azure.json loadBalancerName, else the cluster name.
	LBNamePrefix string
	// Zones of the region; new Standard public IPs and internal frontends are zone-redundant over
	// all of them. Empty in regions without zones.
	Zones               []string
	DisableOutboundSNAT bool
	// SharedProbe is clusterServiceLoadBalancerHealthProbeMode=shared: cluster-policy services
	// share one HTTP probe on the kube-proxy health port.
	SharedProbe     bool
	SharedProbePort int32
	SharedProbePath string
	// TagPolicy is azure.json tags, tagsMap and systemTags: set on created load balancers and
	// public IPs, and reconciled on them and on the NSG on every write of a service.
	TagPolicy tags.Policy
	// IPTagMutation is enableIPTagMutationForExistingPublicIP.
	IPTagMutation bool
	// EdgeZone is extendedLocationName: created load balancers and public IPs go to that edge
	// zone (extendedLocation) and get no availability zones ("" in the region).
	EdgeZone string
}

// extendedLocation is the edge zone of created resources (nil in the region).
func (c *Cluster) extendedLocation() *armnetwork.ExtendedLocation {
	if c.EdgeZone == "" {
		return nil
	}
	return &armnetwork.ExtendedLocation{Name: to.Ptr(c.EdgeZone), Type: to.Ptr(armnetwork.ExtendedLocationTypesEdgeZone)}
}

// LBName is the Azure load balancer a service of this kind lands on.
func (c *Cluster) LBName(internal bool) string {
	prefix := c.LBNamePrefix
	if prefix == "" {
		prefix = c.ClusterName
	}
	return naming.LoadBalancerName(prefix, internal)
}

// LBID is the resource ID of the named load balancer.
func (c *Cluster) LBID(lbName string) string {
	return fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/loadBalancers/%s",
		c.SubscriptionID, c.ResourceGroup, lbName)
}

func (c *Cluster) childID(lbName, kind, name string) string {
	return c.LBID(lbName) + "/" + kind + "/" + name
}

// Service is a Kubernetes service with its parsed annotations.
type Service struct {
	Svc  *v1.Service
	Opts *annotations.ServiceOptions
	// LocalPool: the rules use the service's dedicated backend pool instead of the cluster pool
	// (externalTrafficPolicy: Local with multiple Standard load balancers).
	LocalPool bool
}

// PoolName is the backend pool the service's rules of family f point at.
func (s *Service) PoolName(c *Cluster, f naming.Family) string {
	if s.LocalPool {
		return naming.LocalServicePoolName(s.Svc.Namespace, s.Svc.Name, f)
	}
	return naming.BackendPoolName(c.ClusterName, f)
}

// Key is <namespace>/<name>, as in the ownership tags.
func (s *Service) Key() string { return naming.ServiceKey(s.Svc.Namespace, s.Svc.Name) }

// LBName is the service's name prefix on Azure (a + UID).
func (s *Service) LBName() string { return naming.ServiceLBName(s.Svc.UID) }

// DualStack reports whether the service has both IP families.
func (s *Service) DualStack() bool { return naming.IsDualStack(s.Svc) }

// Families are the service's IP families.
func (s *Service) Families() []naming.Family { return naming.Families(s.Svc) }

// Subnet is the internal-subnet annotation that changes frontend and rule names.
func (s *Service) Subnet() string { return s.Opts.InternalSubnet }

// IsLocal reports externalTrafficPolicy: Local with a health-check node port, which moves probing
// to kube-proxy's per-service health check.
func (s *Service) IsLocal() bool {
	return s.Svc.Spec.Type == v1.ServiceTypeLoadBalancer &&
		s.Svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal &&
		s.Svc.Spec.HealthCheckNodePort != 0
}

func eqFold(a, b string) bool { return strings.EqualFold(a, b) }

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
