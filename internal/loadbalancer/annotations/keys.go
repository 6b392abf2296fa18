// Package annotations parses and validates every Service annotation of the existing Azure cloud
// provider into a typed ServiceOptions. Parsing is pure: an invalid value is an error naming the
// annotation and the value, so the service controller can emit a Warning event and write nothing
// to ARM.
package annotations

import "fmt"

// Prefix is shared by every annotation the provider reads.
const Prefix = "service.beta.kubernetes.io/"

// Load balancer type, IPs and selection.
const (
	Internal               = Prefix + "azure-load-balancer-internal"
	InternalSubnet         = Prefix + "azure-load-balancer-internal-subnet"
	IPv4                   = Prefix + "azure-load-balancer-ipv4"
	IPv6                   = Prefix + "azure-load-balancer-ipv6"
	PIPName                = Prefix + "azure-pip-name"
	PIPNameIPv6            = Prefix + "azure-pip-name-ipv6"
	PIPPrefixID            = Prefix + "azure-pip-prefix-id"
	PIPPrefixIDIPv6        = Prefix + "azure-pip-prefix-id-ipv6"
	ResourceGroup          = Prefix + "azure-load-balancer-resource-group"
	DNSLabelName           = Prefix + "azure-dns-label-name"
	PIPTags                = Prefix + "azure-pip-tags"
	PIPIPTags              = Prefix + "azure-pip-ip-tags"
	AdditionalPublicIPs    = Prefix + "azure-additional-public-ips"
	Mode                   = Prefix + "azure-load-balancer-mode"
	LoadBalancerConfigs    = Prefix + "azure-load-balancer-configurations"
	CoreLBSourceRanges     = Prefix + "load-balancer-source-ranges"
	DisableNSGRule         = Prefix + "azure-disable-load-balancer-nsg-rule"
	AllowedServiceTags     = Prefix + "azure-allowed-service-tags"
	AllowedIPRanges        = Prefix + "azure-allowed-ip-ranges"
	DenyAllExceptLBSources = Prefix + "azure-deny-all-except-load-balancer-source-ranges"
)

// Rules and probes.
const (
	TCPIdleTimeout        = Prefix + "azure-load-balancer-tcp-idle-timeout"
	DisableTCPReset       = Prefix + "azure-load-balancer-disable-tcp-reset"
	DisableFloatingIP     = Prefix + "azure-disable-load-balancer-floating-ip"
	HAPorts               = Prefix + "azure-load-balancer-enable-high-availability-ports"
	ProbeProtocol         = Prefix + "azure-load-balancer-health-probe-protocol"
	ProbeRequestPath      = Prefix + "azure-load-balancer-health-probe-request-path"
	ProbeInterval         = Prefix + "azure-load-balancer-health-probe-interval"
	ProbeNumOfProbe       = Prefix + "azure-load-balancer-health-probe-num-of-probe"
	portAnnotationPattern = Prefix + "port_%d_"
)

// Per-port probe parameters, used as the suffix of PortProbeKey.
const (
	PortProbeProtocol    = "protocol"
	PortProbePort        = "port"
	PortProbeInterval    = "interval"
	PortProbeNumOfProbe  = "num-of-probe"
	PortProbeRequestPath = "request-path"
)

// PortProbeKey is the annotation overriding one probe parameter of one service port, for example
// service.beta.kubernetes.io/port_80_health-probe_protocol.
func PortProbeKey(port int32, param string) string {
	return fmt.Sprintf(portAnnotationPattern, port) + "health-probe_" + param
}

// PortNoLBRuleKey disables the LB rule (and probe) of one service port.
func PortNoLBRuleKey(port int32) string {
	return fmt.Sprintf(portAnnotationPattern, port) + "no_lb_rule"
}

// PortNoProbeRuleKey disables the probe of one service port.
func PortNoProbeRuleKey(port int32) string {
	return fmt.Sprintf(portAnnotationPattern, port) + "no_probe_rule"
}

// Private Link Service.
const (
	PLSCreate         = Prefix + "azure-pls-create"
	PLSName           = Prefix + "azure-pls-name"
	PLSResourceGroup  = Prefix + "azure-pls-resource-group"
	PLSSubnet         = Prefix + "azure-pls-ip-configuration-subnet"
	PLSIPAddressCount = Prefix + "azure-pls-ip-configuration-ip-address-count"
	PLSIPAddresses    = Prefix + "azure-pls-ip-configuration-ip-address"
	PLSFQDNs          = Prefix + "azure-pls-fqdns"
	PLSProxyProtocol  = Prefix + "azure-pls-proxy-protocol"
	PLSVisibility     = Prefix + "azure-pls-visibility"
	PLSAutoApproval   = Prefix + "azure-pls-auto-approval"
	// PLSAlias is written by the CCM, not read: the alias of the service's private link
	// service, for consumers creating private endpoints.
	PLSAlias = Prefix + "azure-pls-alias"
)

// Defaults of the existing provider.
const (
	DefaultIdleTimeoutMinutes = 4
	MinIdleTimeoutMinutes     = 4
	MaxIdleTimeoutMinutes     = 100
	DefaultProbeInterval      = 5
	MinProbeInterval          = 5
	DefaultProbeThreshold     = 2
	MinProbeThreshold         = 2
	// MaxProbeTotalSeconds bounds interval × threshold (exclusive), as ARM does.
	MaxProbeTotalSeconds = 120
	DefaultProbeHTTPPath = "/"
	DefaultPLSIPCount    = 1
	MaxPLSIPCount        = 8
	LocalHealthCheckPath = "/healthz"
	ServiceTagInternet   = "Internet"
	ModeAuto             = "__auto__"
)
