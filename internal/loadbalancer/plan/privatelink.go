package plan

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
)

// Private link services (PLS) of LoadBalancer services: one PLS per load balancer frontend, on
// the service's IPv4 frontend, named and tagged as the existing provider does so that a cluster
// switching over finds its PLS (and its consumers' connections) where they are.

// Tags of a PLS the cluster manages: the cluster it belongs to and the service whose annotations
// configure it. A PLS without the cluster tag is a user's and is never changed or deleted.
const (
	TagPLSCluster = "k8s-azure-cluster-name"
	TagPLSOwner   = "k8s-azure-owner-service"
)

// plsIPConfigNameMax is ARM's limit on ip configuration names.
const plsIPConfigNameMax = 80

// PrivateLinkName is the PLS name of a frontend: the azure-pls-name annotation, else
// pls-<frontend name>.
func PrivateLinkName(o annotations.PLSOptions, frontendName string) string {
	if o.Name != "" {
		return o.Name
	}
	return "pls-" + frontendName
}

// PrivateLinkResourceGroup is where the service's PLS lives: azure-pls-resource-group, else
// azure.json privateLinkServiceResourceGroup, else resourceGroup.
func PrivateLinkResourceGroup(cfg *config.Config, s *Service) string {
	if s.Opts.PLS.ResourceGroup != "" {
		return s.Opts.PLS.ResourceGroup
	}
	return cfg.PrivateLinkServiceRG()
}

// PrivateLinkSubnet is the NAT subnet of the service's PLS: azure-pls-ip-configuration-subnet,
// else the internal-subnet annotation of an internal service, else azure.json subnetName.
func PrivateLinkSubnet(cfg *config.Config, s *Service) string {
	switch {
	case s.Opts.PLS.Subnet != "":
		return s.Opts.PLS.Subnet
	case s.Opts.Internal && s.Opts.InternalSubnet != "":
		return s.Opts.InternalSubnet
	}
	return cfg.SubnetName
}

// PrivateLinkFrontend is the frontend of the service a PLS goes on: its IPv4 one (PLS does not
// support IPv6). nil when the service has none.
func PrivateLinkFrontend(lb *armnetwork.LoadBalancer, svcLBName string) *armnetwork.FrontendIPConfiguration {
	for _, fe := range ServiceFrontends(lb, svcLBName) {
		if fe.Properties == nil {
			continue
		}
		if a, ok := AddrOf(fe.Properties.PrivateIPAddress); ok && a.Is6() {
			continue
		}
		if fe.Properties.PrivateIPAddressVersion != nil && *fe.Properties.PrivateIPAddressVersion == armnetwork.IPVersionIPv6 {
			continue
		}
		if strings.HasSuffix(strings.ToLower(str(fe.Name)), "-ipv6") {
			continue
		}
		return fe
	}
	return nil
}

// PrivateLinkOf is the PLS (of list) that references the frontend frontendID, nil when none.
func PrivateLinkOf(list []*armnetwork.PrivateLinkService, frontendID string) *armnetwork.PrivateLinkService {
	for _, p := range list {
		if p == nil || p.Properties == nil {
			continue
		}
		for _, fe := range p.Properties.LoadBalancerFrontendIPConfigurations {
			if fe != nil && strings.EqualFold(str(fe.ID), frontendID) {
				return p
			}
		}
	}
	return nil
}

// PrivateLinksOn are the PLS of list that reference a frontend of the load balancer lbID.
func PrivateLinksOn(list []*armnetwork.PrivateLinkService, lbID string) []*armnetwork.PrivateLinkService {
	var out []*armnetwork.PrivateLinkService
	for _, p := range list {
		if p == nil || p.Properties == nil {
			continue
		}
		for _, fe := range p.Properties.LoadBalancerFrontendIPConfigurations {
			if fe != nil && strings.EqualFold(azureid.Parent(str(fe.ID)), lbID) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// RemovedFrontendIDs are the frontends of before that after no longer has (after nil: all).
func RemovedFrontendIDs(before, after *armnetwork.LoadBalancer) []string {
	if before == nil || before.Properties == nil {
		return nil
	}
	keep := map[string]bool{}
	if after != nil && after.Properties != nil {
		for _, fe := range after.Properties.FrontendIPConfigurations {
			keep[strings.ToLower(str(fe.Name))] = true
		}
	}
	var out []string
	for _, fe := range before.Properties.FrontendIPConfigurations {
		if !keep[strings.ToLower(str(fe.Name))] && fe.ID != nil {
			out = append(out, *fe.ID)
		}
	}
	return out
}

// ManagedPrivateLink reports whether the cluster manages the PLS (its cluster tag).
func ManagedPrivateLink(p *armnetwork.PrivateLinkService, clusterName string) bool {
	return p != nil && strings.EqualFold(strings.TrimSpace(tagValue(p.Tags, TagPLSCluster)), clusterName)
}

// PrivateLinkOwner is the service (namespace/name) whose annotations configure the PLS.
func PrivateLinkOwner(p *armnetwork.PrivateLinkService) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(tagValue(p.Tags, TagPLSOwner))
}

func tagValue(tags map[string]*string, key string) string {
	for k, v := range tags {
		if strings.EqualFold(k, key) && v != nil {
			return *v
		}
	}
	return ""
}

// PrivateLinkAction is what to do with a frontend's PLS.
type PrivateLinkAction int

const (
	// PLSNone: nothing to write (no PLS wanted and none owned; or the service shares a PLS
	// another service configures).
	PLSNone PrivateLinkAction = iota
	// PLSWrite: create the PLS (Name) or bring it to the service's annotations.
	PLSWrite
	// PLSHandOver: the owner no longer wants the PLS, another service on its frontend does:
	// the PLS stays and NewOwner configures it from now on.
	PLSHandOver
	// PLSDelete: nobody on the frontend wants the PLS any more.
	PLSDelete
)

// PrivateLinkDecision is the decision for one frontend.
type PrivateLinkDecision struct {
	Action PrivateLinkAction
	// Name of the PLS to write or delete.
	Name string
	// NewOwner of a hand-over.
	NewOwner string
}

// Errors of DecidePrivateLink, each a user mistake to report on the service.
var (
	ErrPLSNotManaged  = errors.New("the frontend already has a private link service that this cluster does not manage")
	ErrPLSRename      = errors.New("an existing private link service cannot be renamed")
	ErrPLSOtherOwner  = errors.New("the frontend's private link service is configured by another service")
	ErrPLSNeedsIPv4   = errors.New("a private link service needs an IPv4 frontend")
	ErrPLSNotPossible = errors.New("a private link service needs an internal load balancer or floating IP disabled")
)

// PrivateLinkInput is what the decision for a service's frontend depends on.
type PrivateLinkInput struct {
	ClusterName string
	// Service is the service being reconciled (its key and its PLS annotations).
	Service *Service
	// FrontendName names the frontend (for the default PLS name).
	FrontendName string
	// Existing is the PLS on the frontend (nil when none).
	Existing *armnetwork.PrivateLinkService
	// OwnerWants reports whether the service named by the existing PLS's owner tag still wants
	// it (it exists, is not being deleted, still uses the frontend and has azure-pls-create).
	OwnerWants bool
	// OthersWanting are the other services on the frontend that want a PLS, in a stable order.
	OthersWanting []string
}

// DecidePrivateLink decides what the service's reconcile does with its frontend's PLS. Only
// the owner's annotations configure a PLS; services sharing the frontend share it; a user's
// PLS is never touched; the owner's removal of azure-pls-create hands the PLS over to another
// service that wants one, or deletes it.
func DecidePrivateLink(in PrivateLinkInput) (PrivateLinkDecision, error) {
	o := in.Service.Opts.PLS
	me := in.Service.Key()
	p := in.Existing
	if p == nil {
		if !o.Create {
			return PrivateLinkDecision{}, nil
		}
		return PrivateLinkDecision{Action: PLSWrite, Name: PrivateLinkName(o, in.FrontendName)}, nil
	}
	name := str(p.Name)
	if !ManagedPrivateLink(p, in.ClusterName) {
		if o.Create {
			return PrivateLinkDecision{}, fmt.Errorf("%w (%s)", ErrPLSNotManaged, name)
		}
		return PrivateLinkDecision{}, nil
	}
	owner := PrivateLinkOwner(p)
	mine := strings.EqualFold(owner, me)
	switch {
	case o.Create && mine, o.Create && !in.OwnerWants:
		// The owner, or the service taking over from an owner that is gone.
		if o.Name != "" && !strings.EqualFold(o.Name, name) {
			return PrivateLinkDecision{}, fmt.Errorf("%w (%s to %s): delete the service's azure-pls-name annotation or recreate the service", ErrPLSRename, name, o.Name)
		}
		return PrivateLinkDecision{Action: PLSWrite, Name: name}, nil
	case o.Create:
		if hasPLSConfig(in.Service) {
			return PrivateLinkDecision{}, fmt.Errorf("%w (%s, owner %s): only the owner's azure-pls-* annotations apply", ErrPLSOtherOwner, name, owner)
		}
		return PrivateLinkDecision{}, nil // share it as it is
	case mine && len(in.OthersWanting) > 0:
		return PrivateLinkDecision{Action: PLSHandOver, Name: name, NewOwner: in.OthersWanting[0]}, nil
	case mine || (!in.OwnerWants && len(in.OthersWanting) == 0):
		// Nobody on the frontend wants it any more (its owner included, or the owner is gone).
		return PrivateLinkDecision{Action: PLSDelete, Name: name}, nil
	}
	return PrivateLinkDecision{}, nil
}

// hasPLSConfig reports whether the service sets PLS annotations beyond azure-pls-create.
func hasPLSConfig(s *Service) bool {
	for _, k := range []string{annotations.PLSName, annotations.PLSSubnet, annotations.PLSIPAddressCount, annotations.PLSIPAddresses,
		annotations.PLSFQDNs, annotations.PLSProxyProtocol, annotations.PLSVisibility, annotations.PLSAutoApproval} {
		if _, ok := s.Svc.Annotations[k]; ok {
			return true
		}
	}
	return false
}

// PrivateLinkSpec is the desired PLS of a frontend.
type PrivateLinkSpec struct {
	ClusterName string
	Location    string
	// Owner is the service key of the owner tag.
	Owner      string
	Options    annotations.PLSOptions
	FrontendID string
	// SubnetID and SubnetName are the NAT subnet.
	SubnetID, SubnetName string
	// Tags from azure.json (tags/tagsMap).
	Tags map[string]string
}

// ApplyPrivateLink makes cur (nil: to be created as name) the PLS spec describes. It is a
// writer mutation. Only what the annotations say is changed: NAT ip configurations are
// rewritten only when their count, subnet or static addresses differ (so dynamic addresses stay),
// and tags other than the cluster, owner and azure.json ones are kept.
func ApplyPrivateLink(cur *armnetwork.PrivateLinkService, name string, spec PrivateLinkSpec) (*armnetwork.PrivateLinkService, error) {
	if cur == nil {
		cur = &armnetwork.PrivateLinkService{Name: to.Ptr(name), Location: to.Ptr(spec.Location)}
	} else if !ManagedPrivateLink(cur, spec.ClusterName) {
		return nil, fmt.Errorf("%w (%s)", ErrPLSNotManaged, str(cur.Name))
	}
	if cur.Properties == nil {
		cur.Properties = &armnetwork.PrivateLinkServiceProperties{}
	}
	p := cur.Properties
	if !slices.ContainsFunc(p.LoadBalancerFrontendIPConfigurations, func(fe *armnetwork.FrontendIPConfiguration) bool {
		return fe != nil && strings.EqualFold(str(fe.ID), spec.FrontendID)
	}) {
		p.LoadBalancerFrontendIPConfigurations = []*armnetwork.FrontendIPConfiguration{{ID: to.Ptr(spec.FrontendID)}}
	}
	o := spec.Options
	if !natConfigsMatch(p.IPConfigurations, o, spec.SubnetID) {
		p.IPConfigurations = natConfigs(str(cur.Name), o, spec.SubnetID, spec.SubnetName)
	}
	if o.ProxyProtocol || p.EnableProxyProtocol != nil {
		p.EnableProxyProtocol = to.Ptr(o.ProxyProtocol)
	}
	if !sameSet(o.FQDNs, derefAll(p.Fqdns)) {
		p.Fqdns = to.SliceOfPtrs(o.FQDNs...)
	}
	var vis, auto []string
	if p.Visibility != nil {
		vis = derefAll(p.Visibility.Subscriptions)
	}
	if p.AutoApproval != nil {
		auto = derefAll(p.AutoApproval.Subscriptions)
	}
	if !sameSet(o.Visibility, vis) || !sameSet(o.AutoApproval, auto) {
		p.Visibility = &armnetwork.PrivateLinkServicePropertiesVisibility{Subscriptions: to.SliceOfPtrs(o.Visibility...)}
		p.AutoApproval = &armnetwork.PrivateLinkServicePropertiesAutoApproval{Subscriptions: to.SliceOfPtrs(o.AutoApproval...)}
	}
	if cur.Tags == nil {
		cur.Tags = map[string]*string{}
	}
	for k, v := range spec.Tags {
		setTag(cur.Tags, k, "", v)
	}
	setTag(cur.Tags, TagPLSCluster, "", spec.ClusterName)
	setTag(cur.Tags, TagPLSOwner, "", spec.Owner)
	return cur, nil
}

// HandOverPrivateLink is the mutation that makes newOwner the PLS's owner.
func HandOverPrivateLink(cur *armnetwork.PrivateLinkService, clusterName, newOwner string) (*armnetwork.PrivateLinkService, error) {
	if cur == nil {
		return nil, nil
	}
	if !ManagedPrivateLink(cur, clusterName) {
		return nil, fmt.Errorf("%w (%s)", ErrPLSNotManaged, str(cur.Name))
	}
	setTag(cur.Tags, TagPLSOwner, "", newOwner)
	return cur, nil
}

// natConfigsMatch reports whether the NAT ip configurations already give what the annotations
// ask: the count, the subnet, the static addresses and the primary one.
func natConfigsMatch(have []*armnetwork.PrivateLinkServiceIPConfiguration, o annotations.PLSOptions, subnetID string) bool {
	count := int(o.IPAddressCount)
	if count < 1 {
		count = annotations.DefaultPLSIPCount
	}
	if len(have) != count {
		return false
	}
	var statics []netip.Addr
	primary := netip.Addr{}
	for _, c := range have {
		p := c.Properties
		if p == nil || p.Subnet == nil || !strings.EqualFold(str(p.Subnet.ID), subnetID) {
			return false
		}
		static := p.PrivateIPAllocationMethod != nil && *p.PrivateIPAllocationMethod == armnetwork.IPAllocationMethodStatic
		a, _ := AddrOf(p.PrivateIPAddress)
		if static {
			statics = append(statics, a)
		}
		if p.Primary != nil && *p.Primary && static {
			primary = a
		}
	}
	if len(statics) != len(o.IPAddresses) {
		return false
	}
	for _, a := range o.IPAddresses {
		if !slices.Contains(statics, a.Unmap()) {
			return false
		}
	}
	want := netip.Addr{}
	if len(o.IPAddresses) > 0 {
		want = o.IPAddresses[0].Unmap()
	}
	return primary == want
}

// natConfigs are the NAT ip configurations for the annotations, named as the existing provider
// names them: <subnet>-<pls>-static-<ip> and <subnet>-<pls>-dynamic-<i>, the prefix cut so a
// name fits ARM's 80 characters. The first static address (else the first dynamic one) is
// primary.
func natConfigs(plsName string, o annotations.PLSOptions, subnetID, subnetName string) []*armnetwork.PrivateLinkServiceIPConfiguration {
	name := func(suffix string) string {
		prefix := subnetName + "-" + plsName
		if room := plsIPConfigNameMax - len(suffix); len(prefix) > room {
			prefix = prefix[:room]
		}
		return prefix + suffix
	}
	count := int(o.IPAddressCount)
	if count < 1 {
		count = annotations.DefaultPLSIPCount
	}
	var out []*armnetwork.PrivateLinkServiceIPConfiguration
	for i, a := range o.IPAddresses {
		out = append(out, &armnetwork.PrivateLinkServiceIPConfiguration{
			Name: to.Ptr(name("-static-" + a.String())),
			Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
				PrivateIPAddress:          to.Ptr(a.String()),
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodStatic),
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(subnetID)},
				Primary:                   to.Ptr(i == 0),
				PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
			},
		})
	}
	for i := 0; i < count-len(o.IPAddresses); i++ {
		out = append(out, &armnetwork.PrivateLinkServiceIPConfiguration{
			Name: to.Ptr(name(fmt.Sprintf("-dynamic-%d", i))),
			Properties: &armnetwork.PrivateLinkServiceIPConfigurationProperties{
				PrivateIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethodDynamic),
				Subnet:                    &armnetwork.Subnet{ID: to.Ptr(subnetID)},
				Primary:                   to.Ptr(len(o.IPAddresses) == 0 && i == 0),
				PrivateIPAddressVersion:   to.Ptr(armnetwork.IPVersionIPv4),
			},
		})
	}
	return out
}

// DisablePrivateLinkPolicies is the subnet mutation a PLS needs: Azure refuses NAT addresses in
// a subnet whose privateLinkServiceNetworkPolicies are enabled. A missing subnet is an error
// (the provider never creates subnets).
func DisablePrivateLinkPolicies(cur *armnetwork.Subnet) (*armnetwork.Subnet, error) {
	if cur == nil {
		return nil, errors.New("the private link service's NAT subnet does not exist")
	}
	if cur.Properties == nil {
		cur.Properties = &armnetwork.SubnetPropertiesFormat{}
	}
	if p := cur.Properties.PrivateLinkServiceNetworkPolicies; p == nil || *p != armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled {
		cur.Properties.PrivateLinkServiceNetworkPolicies = to.Ptr(armnetwork.VirtualNetworkPrivateLinkServiceNetworkPoliciesDisabled)
	}
	return cur, nil
}

// ConnectionNames are the private endpoint connections of a PLS (those a deletion removes).
func ConnectionNames(p *armnetwork.PrivateLinkService) []string {
	if p == nil || p.Properties == nil {
		return nil
	}
	var out []string
	for _, c := range p.Properties.PrivateEndpointConnections {
		if c != nil && c.Name != nil {
			out = append(out, *c.Name)
		}
	}
	return out
}

func derefAll(ps []*string) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		if p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// sameSet compares string lists as sets, case-insensitively (subscription IDs, DNS names).
func sameSet(a, b []string) bool {
	norm := func(l []string) []string {
		out := make([]string, 0, len(l))
		for _, s := range l {
			out = append(out, strings.ToLower(s))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}
