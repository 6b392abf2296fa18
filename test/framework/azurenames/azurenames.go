// Package azurenames states, for the end-to-end and chaos tests, the names and tags that the
// existing Azure cloud provider (kubernetes-sigs/cloud-provider-azure) gives the Azure
// resources it manages. A cluster switches to this CCM without one Azure resource being
// recreated only if the CCM finds and writes exactly these names, so the tests must expect them
// from an independent statement of the scheme: this package is written from that provider's
// documented behaviour and shares no code with the CCM's own naming. If the CCM's names drift,
// the tests that use this package fail.
package azurenames

import (
	"crypto/md5" //nolint:gosec // the existing provider's rule-name hash, not security
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The scheme. Each format takes, in order, the values named in its comment. uid32 is the
// service's LB name (ServiceLBName); PROTO is the Kubernetes protocol spelling (TCP, UDP, SCTP).
const (
	fmtPublicLB       = "%s"          // <cluster> (or azure.json loadBalancerName)
	fmtInternalLB     = "%s-internal" // <cluster>-internal
	fmtServiceLB      = "a%s"         // a<service UID without dashes>, cut to 32 characters
	fmtSubnetFrontend = "%s-%s"       // <uid32>-<subnet> (internal-subnet annotation), cut to 75
	fmtRule           = "%s-%s-%d"    // <uid32>-<PROTO>-<port>; also the name of the rule's probe
	fmtSubnetRule     = "%s-%s-%s-%d" // <uid32>-<subnet>-<PROTO>-<port>, subnet cut to keep 75
	fmtDualStackIPv6  = "%s-IPv6"     // the IPv6 member of a dual-stack service's frontend, rule, probe, PIP
	fmtPool           = "%s"          // <cluster>
	fmtPoolIPv6       = "%s-IPv6"     // <cluster>-IPv6, whatever the service's families
	fmtLocalPool      = "%s-%s"       // lower(<namespace>-<name>): multi-SLB ETP=Local pool
	fmtLocalPoolIPv6  = "%s-%s-ipv6"  // lower(<namespace>-<name>)-ipv6
	fmtPublicIP       = "%s-%s"       // <cluster>-<uid32>, cut to 75
	fmtPrefixPublicIP = "%s-%s-%s"    // <cluster>-<uid32>-<PIP prefix name>, cut to 75
	fmtAllowRule      = "k8s-azure-lb_allow_%s_%x"
	fmtAllowRuleKey   = "%s_%s_%s" // md5 input: <protocol>_<sources>_<ports>, both lists sorted, ',' joined
	fmtDenyAllRule    = "k8s-azure-lb_deny-all_%s"
	fmtRoute          = "%s____%s" // <node>____<pod CIDR without '.', ':' and '/'>
	fmtPrivateLink    = "pls-%s"   // pls-<frontend name>
	fmtServiceKey     = "%s/%s"    // <namespace>/<name> in the service tag

	// SharedProbeName is the one probe of all Cluster-policy services in shared probe mode.
	SharedProbeName = "cluster-service-shared-health-probe"

	// serviceLBLength is the cut of the service LB name (cloudprovider.DefaultLoadBalancerName).
	serviceLBLength = 32
	// cutLength keeps frontend, rule and PIP names within ARM's 80 characters once the
	// dual-stack suffix "-IPv6" (5 characters) is added.
	cutLength = 80 - 5

	// securityRulePrefix and the priority band make an NSG rule the provider's.
	securityRulePrefix = "k8s-azure-lb"
	minRulePriority    = 500
	maxRulePriority    = 4096
)

// Tags.
const (
	// TagService lists the services owning a public IP: <ns>/<name>[,<ns>/<name>…].
	TagService = "k8s-azure-service"
	// TagClusterName names the cluster owning a public IP (and a private link service).
	TagClusterName = "k8s-azure-cluster-name"
	// TagDNSLabelService names the service owning a public IP's DNS label.
	TagDNSLabelService = "k8s-azure-dns-label-service"
	// TagPLSOwner names the service owning a private link service: <ns>/<name>.
	TagPLSOwner = "k8s-azure-owner-service"
)

// Service gateway names (loadBalancerSku service). A service's gateway identity is its UID in
// lower case; an egress identity is its label value in lower case. The service's load balancer
// and its one backend pool, and an egress identity's NAT gateway, are named by the identity.
const (
	// ServiceGatewayName is the gateway's fixed name in the cluster resource group.
	ServiceGatewayName = "servicegateway"
	// GatewayLBSKU is the SKU of a service's gateway load balancer.
	GatewayLBSKU = "Service"

	fmtGatewayPublicIP = "%s-pip" // <identity>-pip (an inbound service's, of its one family, or an egress IPv4)
)

// GatewayIdentity is the gateway identity of a service.
func GatewayIdentity(uid types.UID) string { return strings.ToLower(string(uid)) }

// GatewayPublicIPName is the public IP of a gateway identity.
func GatewayPublicIPName(identity string) string { return fmt.Sprintf(fmtGatewayPublicIP, identity) }

// MigrationPoolSuffix ends the temporary IP-based pool that serves a cluster pool's rules while
// the pool moves from NIC-based to IP-based membership. This CCM adds it (the existing provider
// has no such step); '_' never occurs in a Kubernetes name, so it cannot meet a local pool.
const MigrationPoolSuffix = "_ip-migration"

// Family is an IP family as names spell it.
type Family string

// IP families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// ServiceLBName is the service's LB name, the prefix of its frontend, rules and probes.
func ServiceLBName(uid types.UID) string {
	n := fmt.Sprintf(fmtServiceLB, strings.ReplaceAll(string(uid), "-", ""))
	return n[:min(len(n), serviceLBLength)]
}

// LoadBalancerName is the cluster's public or internal load balancer.
func LoadBalancerName(cluster string, internal bool) string {
	if internal {
		return fmt.Sprintf(fmtInternalLB, cluster)
	}
	return fmt.Sprintf(fmtPublicLB, cluster) //nolint:staticcheck // S1025: the format is the table's entry, "%s" today
}

// dualStackIPv6 suffixes the name of a dual-stack service's IPv6 object; a single-stack IPv6
// service's names carry no suffix.
func dualStackIPv6(name string, dual bool, f Family) string {
	if dual && f == IPv6 {
		return fmt.Sprintf(fmtDualStackIPv6, name)
	}
	return name
}

// FrontendName is the service's frontend; subnet is its internal-subnet annotation (or "").
// A name longer than 75 characters is cut, and a cut that ends in anything but a letter or
// '_' has its last character replaced by '_'.
func FrontendName(svcLB, subnet string, dual bool, f Family) string {
	name := svcLB
	if subnet != "" {
		name = fmt.Sprintf(fmtSubnetFrontend, svcLB, subnet)
		if len(name) > cutLength {
			name = name[:cutLength]
			if last := rune(name[cutLength-1]); !unicode.IsLetter(last) && last != '_' {
				name = name[:cutLength-1] + "_"
			}
		}
	}
	return dualStackIPv6(name, dual, f)
}

// RuleName is the service's rule for one port, and the name of that rule's probe; subnet is
// its internal-subnet annotation (or ""), cut so that the name stays within 75 characters.
func RuleName(svcLB, subnet string, proto corev1.Protocol, port int32, dual bool, f Family) string {
	if subnet == "" {
		return dualStackIPv6(fmt.Sprintf(fmtRule, svcLB, proto, port), dual, f)
	}
	room := cutLength - len(fmt.Sprintf(fmtRule, svcLB, proto, port)) - len("-")
	subnet = subnet[:max(0, min(len(subnet), room))]
	return dualStackIPv6(fmt.Sprintf(fmtSubnetRule, svcLB, subnet, proto, port), dual, f)
}

// HAPortsRuleName is the one rule of an HA-ports service: named from its first port.
func HAPortsRuleName(svcLB, subnet string, ports []corev1.ServicePort, dual bool, f Family) string {
	return RuleName(svcLB, subnet, ports[0].Protocol, ports[0].Port, dual, f)
}

// LocalProbeName is the probe of an externalTrafficPolicy: Local service: a TCP rule name on
// the health check node port.
func LocalProbeName(svcLB string, healthCheckNodePort int32, dual bool, f Family) string {
	return RuleName(svcLB, "", corev1.ProtocolTCP, healthCheckNodePort, dual, f)
}

// BackendPoolName is the cluster's backend pool of a family.
func BackendPoolName(cluster string, f Family) string {
	if f == IPv6 {
		return fmt.Sprintf(fmtPoolIPv6, cluster)
	}
	return fmt.Sprintf(fmtPool, cluster) //nolint:staticcheck // S1025: the format is the table's entry, "%s" today
}

// LocalServicePoolName is the dedicated pool of an externalTrafficPolicy: Local service under
// multiple standard load balancers.
func LocalServicePoolName(namespace, name string, f Family) string {
	format := fmtLocalPool
	if f == IPv6 {
		format = fmtLocalPoolIPv6
	}
	return strings.ToLower(fmt.Sprintf(format, namespace, name))
}

// PublicIPName is the managed public IP of the service; prefixID is the resource ID from the
// PIP-prefix annotation of that family (or ""), whose last segment joins the name.
func PublicIPName(cluster, svcLB, prefixID string, dual bool, f Family) string {
	name := fmt.Sprintf(fmtPublicIP, cluster, svcLB)
	if prefixID != "" {
		segs := strings.Split(prefixID, "/")
		name = fmt.Sprintf(fmtPrefixPublicIP, cluster, svcLB, segs[len(segs)-1])
	}
	return dualStackIPv6(name[:min(len(name), cutLength)], dual, f)
}

// AllowRuleName is the NSG allow rule for a protocol (the NSG spelling: Tcp, Udp or *), sources
// and ports. The hash input sorts the sources and the ports' decimal strings as strings, so 443
// comes before 80. Services with equal inputs share the rule.
func AllowRuleName(protocol string, f Family, sources []string, ports []int32) string {
	src := slices.Sorted(slices.Values(sources))
	var dst []string
	for _, p := range ports {
		dst = append(dst, strconv.Itoa(int(p)))
	}
	slices.Sort(dst)
	key := fmt.Sprintf(fmtAllowRuleKey, protocol, strings.Join(src, ","), strings.Join(dst, ","))
	return fmt.Sprintf(fmtAllowRule, f, md5.Sum([]byte(key))) //nolint:gosec
}

// DenyAllRuleName is the NSG deny rule of a family.
func DenyAllRuleName(f Family) string { return fmt.Sprintf(fmtDenyAllRule, f) }

// IsManagedSecurityRule reports whether the existing provider takes an NSG rule as its own:
// the k8s-azure-lb name prefix and a priority in 500..4096.
func IsManagedSecurityRule(name string, priority int32) bool {
	return strings.HasPrefix(name, securityRulePrefix) && priority >= minRulePriority && priority <= maxRulePriority
}

// OwnedByService reports whether a frontend, rule or probe name belongs to the service: it
// starts with the service's LB name (ARM names ignore case, so this does too).
func OwnedByService(svcLB, name string) bool {
	return strings.HasPrefix(strings.ToLower(name), strings.ToLower(svcLB))
}

// RouteName is the route of a node's pod CIDR.
func RouteName(node, cidr string) string {
	return fmt.Sprintf(fmtRoute, node, strings.NewReplacer(".", "", ":", "", "/", "").Replace(cidr))
}

// PrivateLinkName is the default private link service of a frontend (without azure-pls-name).
func PrivateLinkName(frontend string) string { return fmt.Sprintf(fmtPrivateLink, frontend) }

// ServiceKey is a service as the ownership tags name it.
func ServiceKey(namespace, name string) string { return fmt.Sprintf(fmtServiceKey, namespace, name) }

// ParseServiceTag splits a service tag value into its service keys (blanks around and between
// the commas are dropped).
func ParseServiceTag(v string) []string {
	var out []string
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// TagValue returns the value of a tag and whether it is set. ARM tag keys ignore case.
func TagValue(tags map[string]*string, key string) (string, bool) {
	for k, v := range tags {
		if strings.EqualFold(k, key) && v != nil {
			return *v, true
		}
	}
	return "", false
}

// ServiceTagValue is TagValue of TagService.
func ServiceTagValue(tags map[string]*string) (string, bool) { return TagValue(tags, TagService) }

// ClusterTagValue is TagValue of TagClusterName.
func ClusterTagValue(tags map[string]*string) (string, bool) { return TagValue(tags, TagClusterName) }

// DNSLabelServiceTagValue is TagValue of TagDNSLabelService.
func DNSLabelServiceTagValue(tags map[string]*string) (string, bool) {
	return TagValue(tags, TagDNSLabelService)
}
