// Package naming holds the names and tags of the Azure resources the existing Azure cloud provider
// manages. The strings must match it exactly: an existing cluster switches over to this provider
// without one resource being recreated, and ownership is recognised by these names and tags.
package naming

import (
	"crypto/md5" //nolint:gosec // a name hash compatible with the existing provider, not security
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Family is an IP family as it appears in resource names.
type Family string

// IP families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

const (
	// InternalLBSuffix makes the internal LB name from the public one.
	InternalLBSuffix = "-internal"
	// IPv6Suffix marks the IPv6 member of a dual-stack pair (frontend, rule, probe, PIP) and the
	// IPv6 backend pool.
	IPv6Suffix = "-IPv6"

	maxNameLength       = 80
	ipFamilySuffixLen   = len(IPv6Suffix)
	serviceLBNameLength = 32

	// SharedProbeName is the probe shared by all cluster services in "shared" probe mode.
	SharedProbeName = "cluster-service-shared-health-probe"
)

// Ownership tags on public IPs (and legacy keys still honoured when read).
const (
	TagService               = "k8s-azure-service"
	TagClusterName           = "k8s-azure-cluster-name"
	TagDNSLabelService       = "k8s-azure-dns-label-service"
	LegacyTagService         = "service"
	LegacyTagClusterName     = "kubernetes-cluster-name"
	LegacyTagDNSLabelService = "kubernetes-dns-label-service"
	// TagPIPTagKeys lists the tag keys that azure-pip-tags put on a managed public IP, so that
	// a key removed from the annotation is removed from the public IP too (the existing
	// provider removes it only with systemTags).
	TagPIPTagKeys = "k8s-azure-pip-tag-keys"
)

// NSG rule naming and the priority band the provider owns.
const (
	SecurityRulePrefix = "k8s-azure-lb"
	securityRuleSep    = "_"
	MinRulePriority    = 500
	MaxRulePriority    = 4096
)

// ServiceLBName is cloudprovider.DefaultLoadBalancerName: "a" + the UID without dashes, cut to 32
// characters. It prefixes the service's frontend, rules and probes.
func ServiceLBName(uid types.UID) string {
	n := "a" + strings.ReplaceAll(string(uid), "-", "")
	if len(n) > serviceLBNameLength {
		n = n[:serviceLBNameLength]
	}
	return n
}

// LoadBalancerName is the Azure LB of a cluster: <prefix> or <prefix>-internal, where prefix is
// azure.json loadBalancerName when set, else the cluster name.
func LoadBalancerName(prefix string, internal bool) string {
	if internal {
		return prefix + InternalLBSuffix
	}
	return prefix
}

// IsDualStack reports whether the service asks for both IP families.
func IsDualStack(svc *v1.Service) bool { return len(svc.Spec.IPFamilies) > 1 }

// Families returns the IP families of the service in spec order (IPv4 when unset).
func Families(svc *v1.Service) []Family {
	var out []Family
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case v1.IPv4Protocol:
			out = append(out, IPv4)
		case v1.IPv6Protocol:
			out = append(out, IPv6)
		}
	}
	if len(out) == 0 {
		out = []Family{IPv4}
	}
	return out
}

// byFamily adds the IPv6 suffix to the IPv6 member of a dual-stack service only; single-stack
// IPv6 services keep the plain name.
func byFamily(name string, dualStack bool, f Family) string {
	if dualStack && f == IPv6 {
		return name + IPv6Suffix
	}
	return name
}

// FrontendName is a<uid> (or a<uid>-<subnet> for an internal service with a subnet annotation,
// cut to 75 characters whose last one is a letter or '_'), plus -IPv6 for dual-stack IPv6.
func FrontendName(svcLBName, internalSubnet string, dualStack bool, f Family) string {
	name := svcLBName
	if internalSubnet != "" {
		name = svcLBName + "-" + internalSubnet
		if limit := maxNameLength - ipFamilySuffixLen; len(name) > limit {
			name = name[:limit]
			last := rune(name[len(name)-1])
			if !unicode.IsLetter(last) && last != '_' {
				name = name[:len(name)-1] + "_"
			}
		}
	}
	return byFamily(name, dualStack, f)
}

// RuleName is the LB rule (and default probe) name: a<uid>-<PROTO>-<port>, or
// a<uid>-<subnet>-<PROTO>-<port> with the subnet cut so the name stays within 75 characters,
// plus -IPv6 for dual-stack IPv6. PROTO is the Kubernetes spelling (TCP, UDP, SCTP).
func RuleName(svcLBName, internalSubnet string, proto v1.Protocol, port int32, dualStack bool, f Family) string {
	base := fmt.Sprintf("%s-%s-%d", svcLBName, proto, port)
	if internalSubnet == "" {
		return byFamily(base, dualStack, f)
	}
	seg := internalSubnet
	if limit := maxNameLength - ipFamilySuffixLen; len(base)+len(seg)+1 > limit {
		seg = seg[:max(0, limit-len(base)-1)]
	}
	return byFamily(fmt.Sprintf("%s-%s-%s-%d", svcLBName, seg, proto, port), dualStack, f)
}

// BackendPoolName is <cluster> for IPv4 and <cluster>-IPv6 for IPv6.
func BackendPoolName(clusterName string, f Family) string {
	if f == IPv6 {
		return clusterName + IPv6Suffix
	}
	return clusterName
}

// MigrationPoolSuffix names the IP-based pool that serves a cluster pool's rules while the pool
// moves from NIC-based to IP-based membership. "_" never occurs in a Kubernetes name, so it
// cannot collide with a Local service's pool.
const MigrationPoolSuffix = "_ip-migration"

// MigrationPoolName is the staging pool of a cluster pool during its move to IP-based membership.
func MigrationPoolName(pool string) string { return pool + MigrationPoolSuffix }

// LocalServicePoolName is the dedicated backend pool of an externalTrafficPolicy: Local service
// with multiple Standard load balancers: lower("<namespace>-<name>"), plus "-ipv6" for IPv6.
func LocalServicePoolName(namespace, name string, f Family) string {
	n := strings.ToLower(namespace + "-" + name)
	if f == IPv6 {
		return n + "-ipv6"
	}
	return n
}

// PublicIPName is <cluster>-a<uid>[-<prefix name>] cut to 75 characters, plus -IPv6 for dual-stack
// IPv6. prefixID is the azure-pip-prefix-id annotation of that family (may be empty).
func PublicIPName(clusterName, svcLBName, prefixID string, dualStack bool, f Family) string {
	name := clusterName + "-" + svcLBName
	if prefixID != "" {
		name += "-" + prefixID[strings.LastIndex(prefixID, "/")+1:]
	}
	if limit := maxNameLength - ipFamilySuffixLen; len(name) > limit {
		name = name[:limit]
	}
	return byFamily(name, dualStack, f)
}

// ServiceKey is how a service is named in ownership tags: <namespace>/<name>.
func ServiceKey(namespace, name string) string { return namespace + "/" + name }

// ParseServiceTag splits a k8s-azure-service tag value (services sharing one public IP are listed
// comma-separated).
func ParseServiceTag(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// FormatServiceTag joins service keys for the k8s-azure-service tag, deduplicated, in first-seen
// order so that adding a service never reorders (and so rewrites) the existing value.
func FormatServiceTag(keys []string) string {
	var out []string
	for _, k := range keys {
		if k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return strings.Join(out, ",")
}

// ServiceTagValue returns the service tag of a resource, honouring the legacy key, and whether one
// is present. Tag keys are matched case-insensitively, as ARM treats them.
func ServiceTagValue(tags map[string]*string) (string, bool) {
	return tagValue(tags, TagService, LegacyTagService)
}

// ClusterTagValue returns the cluster-name tag (or its legacy key).
func ClusterTagValue(tags map[string]*string) (string, bool) {
	return tagValue(tags, TagClusterName, LegacyTagClusterName)
}

// DNSLabelServiceTagValue returns the DNS-label owner tag (or its legacy key).
func DNSLabelServiceTagValue(tags map[string]*string) (string, bool) {
	return tagValue(tags, TagDNSLabelService, LegacyTagDNSLabelService)
}

func tagValue(tags map[string]*string, keys ...string) (string, bool) {
	for _, want := range keys {
		for k, v := range tags {
			if strings.EqualFold(k, want) && v != nil {
				return *v, true
			}
		}
	}
	return "", false
}

// AllowRuleName is k8s-azure-lb_allow_<family>_<md5 hex of "<protocol>_<sorted sources>_<sorted
// ports>">, where sources and ports are joined by ',' and sorted as strings. protocol is the ARM
// security rule protocol (Tcp, Udp, *). Rules with the same name are shared between services.
func AllowRuleName(protocol string, f Family, sources []string, ports []int32) string {
	src := slices.Clone(sources)
	sort.Strings(src)
	pr := PortStrings(ports)
	v := strings.Join([]string{protocol, strings.Join(src, ","), strings.Join(pr, ",")}, "_")
	sum := md5.Sum([]byte(v)) //nolint:gosec
	return strings.Join([]string{SecurityRulePrefix, "allow", string(f), fmt.Sprintf("%x", sum)}, securityRuleSep)
}

// DenyAllRuleName is k8s-azure-lb_deny-all_<family>.
func DenyAllRuleName(f Family) string {
	return strings.Join([]string{SecurityRulePrefix, "deny-all", string(f)}, securityRuleSep)
}

// PortStrings formats ports as decimal strings sorted as strings (the existing provider's order).
func PortStrings(ports []int32) []string {
	out := make([]string, 0, len(ports))
	for _, p := range ports {
		out = append(out, strconv.FormatInt(int64(p), 10))
	}
	sort.Strings(out)
	return out
}

// IsManagedSecurityRule reports whether an NSG rule belongs to the provider: its name carries the
// k8s-azure-lb prefix and its priority lies in the provider's band.
func IsManagedSecurityRule(name string, priority int32) bool {
	return strings.HasPrefix(name, SecurityRulePrefix+securityRuleSep) &&
		priority >= MinRulePriority && priority <= MaxRulePriority
}

// OwnedByService reports whether a frontend, rule or probe name belongs to the service whose
// ServiceLBName is svcLBName (the existing provider's prefix test).
func OwnedByService(svcLBName, name string) bool {
	return strings.HasPrefix(strings.ToLower(name), strings.ToLower(svcLBName))
}
