package annotations

import (
	"fmt"
	"net/netip"
)

// ProbeProtocol values, spelled as ARM spells them.
const (
	ProbeTCP   = "Tcp"
	ProbeHTTP  = "Http"
	ProbeHTTPS = "Https"
)

// ProbeOverrides are probe settings given by annotations; nil/empty means "not set here".
type ProbeOverrides struct {
	Protocol    string // Tcp, Http or Https (canonical spelling); "" when unset
	RequestPath *string
	Interval    *int32
	NumOfProbe  *int32
	// Port names the service port (number or port name) whose nodePort is probed instead.
	Port string
}

// PortOptions are the per-port annotations of one service port.
type PortOptions struct {
	NoLBRule    bool
	NoProbeRule bool
	Probe       ProbeOverrides
}

// IPTag is one entry of azure-pip-ip-tags.
type IPTag struct {
	Type string
	Tag  string
}

// PLSOptions are the Private Link Service annotations.
type PLSOptions struct {
	Create         bool
	Name           string
	ResourceGroup  string
	Subnet         string
	IPAddressCount int32
	IPAddresses    []netip.Addr
	FQDNs          []string
	ProxyProtocol  bool
	// Visibility holds subscription IDs or the single entry "*".
	Visibility   []string
	AutoApproval []string
}

// Warning is part of an annotation that is not applied as written but does not stop the
// service (the existing provider accepts it): the service reconciles and the user is told.
type Warning struct {
	// Reason is the event reason.
	Reason     string
	Annotation string
	Value      string
	Message    string
}

// Warning reasons.
const (
	// ReasonSourceRangeIgnored: a malformed entry of a source-range key was dropped.
	ReasonSourceRangeIgnored = "InvalidSourceRangeIgnored"
	// ReasonProbePortNotServicePort: a per-port probe port names no service port; that port is
	// probed directly.
	ReasonProbePortNotServicePort = "ProbePortNotServicePort"
	// ReasonPIPTagIgnored: a pair of azure-pip-tags was skipped (no key, no "=" or a second
	// one, or the key given again later).
	ReasonPIPTagIgnored = "InvalidPIPTagIgnored"
)

func (w Warning) String() string {
	return fmt.Sprintf("%s=%q: %s", w.Annotation, w.Value, w.Message)
}

// ServiceOptions is every Azure annotation of a Service, parsed and validated.
type ServiceOptions struct {
	Internal       bool
	InternalSubnet string // only meaningful (and only set) when Internal

	// Requested IPs per family: the annotations, or spec.loadBalancerIP (deprecated) as a fallback.
	IPv4 netip.Addr
	IPv6 netip.Addr

	PIPNameIPv4      string
	PIPNameIPv6      string
	PIPPrefixIDIPv4  string
	PIPPrefixIDIPv6  string
	PIPResourceGroup string
	DNSLabelName     *string // nil: not managed; "": remove the label
	PIPTags          map[string]string
	PIPIPTags        []IPTag
	// PIPIPTagsSet: azure-pip-ip-tags is present (an empty value asks for no IP tags).
	PIPIPTagsSet        bool
	AdditionalPublicIPs []netip.Addr
	Mode                string   // Basic SKU only; parsed for compatibility, ignored on Standard
	Configurations      []string // multi-SLB configuration names

	IdleTimeoutMinutes int32 // 4..100, default 4
	DisableTCPReset    bool
	DisableFloatingIP  bool
	HAPorts            bool
	Probe              ProbeOverrides // the global probe annotations
	Ports              map[int32]PortOptions

	// NSG.
	SourceRanges              []netip.Prefix // spec.loadBalancerSourceRanges or the core annotation
	AllowedIPRanges           []netip.Prefix
	AllowedServiceTags        []string
	DenyAllExceptSourceRanges bool
	DisableNSGRule            bool
	// InvalidRanges are the malformed entries dropped from the source-range keys (key=value).
	// As in the existing provider, a service with any never gets the default Internet allow
	// rule and gets the deny-all rule: a typo never opens a restricted service wider.
	InvalidRanges []string

	PLS PLSOptions

	// Warnings are the parts of annotations that were not applied as written (events).
	Warnings []Warning
}

// Port returns the per-port options of a service port (zero value when none are set).
func (o *ServiceOptions) Port(port int32) PortOptions {
	if o == nil || o.Ports == nil {
		return PortOptions{}
	}
	return o.Ports[port]
}

// ProbeInterval resolves the probe interval for a port (or the global one with port == nil).
func (o *ServiceOptions) ProbeInterval(port *int32) int32 {
	if port != nil {
		if v := o.Port(*port).Probe.Interval; v != nil {
			return *v
		}
	}
	if o.Probe.Interval != nil {
		return *o.Probe.Interval
	}
	return DefaultProbeInterval
}

// ProbeThreshold resolves the probe threshold (number of probes) for a port or globally.
func (o *ServiceOptions) ProbeThreshold(port *int32) int32 {
	if port != nil {
		if v := o.Port(*port).Probe.NumOfProbe; v != nil {
			return *v
		}
	}
	if o.Probe.NumOfProbe != nil {
		return *o.Probe.NumOfProbe
	}
	return DefaultProbeThreshold
}

// AllowedRanges are all source prefixes (spec ranges and the allowed-ip-ranges annotation).
func (o *ServiceOptions) AllowedRanges() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(o.SourceRanges)+len(o.AllowedIPRanges))
	out = append(out, o.SourceRanges...)
	return append(out, o.AllowedIPRanges...)
}
