package annotations

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	v1 "k8s.io/api/core/v1"
)

// InvalidError is one invalid annotation (or spec field) value.
type InvalidError struct {
	Annotation string
	Value      string
	Reason     string
	// Lead, when set, is the existing provider's message for the mistake, which users and
	// tools match on: it opens the message, Reason follows it.
	Lead string
}

func (e *InvalidError) Error() string {
	if e.Lead != "" {
		return e.Lead + ": " + e.Reason
	}
	return fmt.Sprintf("invalid value %q for %s: %s", e.Value, e.Annotation, e.Reason)
}

// Name patterns of Azure resources the annotations refer to.
var (
	resourceNameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,78}[A-Za-z0-9_])?$`)
	resourceGroupRE = regexp.MustCompile(`^[-\w._()]{0,89}[-\w_()]$`)
	dnsLabelRE      = regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)
	serviceTagRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*$`)
	subscriptionRE  = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
	fqdnRE          = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$`)
)

// parser accumulates every error so that one event lists all mistakes at once.
type parser struct {
	ann      map[string]string
	errs     []error
	warnings []Warning
	invalid  []string
}

func (p *parser) warn(reason, key, value, msg string, args ...any) {
	p.warnings = append(p.warnings, Warning{Reason: reason, Annotation: key, Value: value, Message: fmt.Sprintf(msg, args...)})
}

func (p *parser) fail(key, value, reason string, args ...any) {
	p.errs = append(p.errs, &InvalidError{Annotation: key, Value: value, Reason: fmt.Sprintf(reason, args...)})
}

// get returns the trimmed value and whether the annotation is present.
func (p *parser) get(key string) (string, bool) {
	v, ok := p.ann[key]
	return strings.TrimSpace(v), ok
}

func (p *parser) boolean(key string) bool {
	v, ok := p.get(key)
	if !ok {
		return false
	}
	switch {
	case strings.EqualFold(v, "true"):
		return true
	case strings.EqualFold(v, "false"):
		return false
	}
	p.fail(key, v, "must be \"true\" or \"false\"")
	return false
}

func (p *parser) int32In(key string, lo, hi int64) *int32 {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		p.fail(key, v, "must be an integer")
		return nil
	}
	if n < lo || n > hi {
		if hi == int64(^uint32(0)>>1) {
			p.fail(key, v, "must be at least %d", lo)
		} else {
			p.fail(key, v, "must be between %d and %d", lo, hi)
		}
		return nil
	}
	r := int32(n)
	return &r
}

func (p *parser) name(key string, re *regexp.Regexp, what string) string {
	v, ok := p.get(key)
	if !ok || v == "" {
		return ""
	}
	if !re.MatchString(v) {
		p.fail(key, v, "not a valid %s", what)
		return ""
	}
	return v
}

// list splits a separated list, dropping empty entries.
func list(v, sep string) []string {
	var out []string
	for _, s := range strings.Split(v, sep) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (p *parser) fields(key string) []string {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	return strings.Fields(v)
}

func (p *parser) addr(key string, v string, want4, want6 bool) netip.Addr {
	a, err := netip.ParseAddr(v)
	if err != nil || a.Zone() != "" {
		p.fail(key, v, "not an IP address")
		return netip.Addr{}
	}
	a = a.Unmap()
	if want4 && !a.Is4() {
		p.fail(key, v, "not an IPv4 address")
		return netip.Addr{}
	}
	if want6 && !a.Is6() {
		p.fail(key, v, "not an IPv6 address")
		return netip.Addr{}
	}
	return a
}

// prefixes parses a list of CIDRs. A malformed entry is dropped with a warning, as the existing
// provider does; the service then keeps no default Internet rule and gets the deny-all rule
// (ServiceOptions.InvalidRanges), so the typo cannot open it wider than intended.
func (p *parser) prefixes(key string, values []string) []netip.Prefix {
	var out []netip.Prefix
	for _, v := range values {
		pf, err := netip.ParsePrefix(v)
		if err != nil {
			// A bare address is a host route, as the existing provider accepts.
			if a, aerr := netip.ParseAddr(v); aerr == nil && a.Zone() == "" {
				pf = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
			} else {
				p.invalid = append(p.invalid, key+"="+v)
				p.warn(ReasonSourceRangeIgnored, key, v, "not a CIDR; the entry is ignored, the other ranges apply, the service gets no default Internet rule and gets the deny-all NSG rule")
				continue
			}
		}
		out = append(out, pf.Masked())
	}
	return out
}

func (p *parser) keyValues(key string) [][2]string {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	var out [][2]string
	for _, item := range list(v, ",") {
		k, val, found := strings.Cut(item, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !found || k == "" {
			p.fail(key, item, "entries must be key=value")
			continue
		}
		out = append(out, [2]string{k, val})
	}
	return out
}

// pipTags reads azure-pip-tags as the existing provider does: comma-separated key=value pairs;
// the key is trimmed, the value too unless it is "null" in any case once trimmed (ARM reserves
// that value, so the spaces around it are kept as written); a value may be empty. A pair
// without a key, without "=" or with a second "=" is skipped with a warning, and the other tags
// apply. A key given twice (in any case: ARM tag keys ignore case) takes the later value, with a
// warning naming the earlier pair.
func (p *parser) pipTags() map[string]string {
	v, ok := p.ann[PIPTags]
	if !ok || strings.TrimSpace(v) == "" {
		return nil
	}
	var out map[string]string
	from := map[string]string{} // lower-cased key -> the pair that set it
	for _, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		parts := strings.Split(item, "=")
		if len(parts) != 2 || strings.TrimSpace(parts[0]) == "" {
			p.warn(ReasonPIPTagIgnored, PIPTags, item, "not a key=value pair with a key and one \"=\"; the pair is ignored, the other tags apply")
			continue
		}
		k, val := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1])
		if strings.EqualFold(val, "null") {
			val = parts[1]
		}
		if out == nil {
			out = map[string]string{}
		}
		for old := range out {
			if strings.EqualFold(old, k) {
				p.warn(ReasonPIPTagIgnored, PIPTags, from[strings.ToLower(k)], "the key is given again later; the later value applies")
				delete(out, old)
			}
		}
		out[k], from[strings.ToLower(k)] = val, item
	}
	return out
}

func (p *parser) prefixID(key string) string {
	v, ok := p.get(key)
	if !ok || v == "" {
		return ""
	}
	id, err := arm.ParseResourceID(v)
	if err != nil || !strings.EqualFold(id.ResourceType.String(), "Microsoft.Network/publicIPPrefixes") {
		p.fail(key, v, "not a public IP prefix resource ID (/subscriptions/…/providers/Microsoft.Network/publicIPPrefixes/<name>)")
		return ""
	}
	return v
}

func (p *parser) probeProtocol(key string) string {
	v, ok := p.get(key)
	if !ok || v == "" {
		return ""
	}
	for _, c := range []string{ProbeTCP, ProbeHTTP, ProbeHTTPS} {
		if strings.EqualFold(v, c) {
			return c
		}
	}
	p.fail(key, v, "must be Tcp, Http or Https")
	return ""
}

func (p *parser) requestPath(key string) *string {
	v, ok := p.get(key)
	if !ok {
		return nil
	}
	if !strings.HasPrefix(v, "/") {
		p.fail(key, v, "must be an absolute path starting with /")
		return nil
	}
	return &v
}

const maxInt32 = int64(^uint32(0) >> 1)

func (p *parser) probe(protoKey, pathKey, intervalKey, numKey string) ProbeOverrides {
	return ProbeOverrides{
		Protocol:    p.probeProtocol(protoKey),
		RequestPath: p.requestPath(pathKey),
		Interval:    p.int32In(intervalKey, MinProbeInterval, maxInt32),
		NumOfProbe:  p.int32In(numKey, MinProbeThreshold, maxInt32),
	}
}

// Parse reads every Azure annotation of svc. The error joins one *InvalidError per mistake; on error
// the returned options must not be used to write to ARM.
func Parse(svc *v1.Service) (*ServiceOptions, error) {
	p := &parser{ann: svc.Annotations}
	if p.ann == nil {
		p.ann = map[string]string{}
	}
	o := &ServiceOptions{Ports: map[int32]PortOptions{}}

	o.Internal = p.boolean(Internal)
	if o.Internal {
		// The subnet annotation is ignored on public services, as in the existing provider.
		o.InternalSubnet = p.name(InternalSubnet, resourceNameRE, "subnet name")
	}
	p.parseIPs(svc, o)

	o.PIPNameIPv4 = p.name(PIPName, resourceNameRE, "public IP name")
	o.PIPNameIPv6 = p.name(PIPNameIPv6, resourceNameRE, "public IP name")
	o.PIPPrefixIDIPv4 = p.prefixID(PIPPrefixID)
	o.PIPPrefixIDIPv6 = p.prefixID(PIPPrefixIDIPv6)
	if o.PIPNameIPv4 != "" && o.PIPPrefixIDIPv4 != "" {
		p.fail(PIPPrefixID, o.PIPPrefixIDIPv4, "cannot be combined with %s", PIPName)
	}
	if o.PIPNameIPv6 != "" && o.PIPPrefixIDIPv6 != "" {
		p.fail(PIPPrefixIDIPv6, o.PIPPrefixIDIPv6, "cannot be combined with %s", PIPNameIPv6)
	}
	o.PIPResourceGroup = p.name(ResourceGroup, resourceGroupRE, "resource group name")
	if v, ok := p.get(DNSLabelName); ok {
		if v != "" && !dnsLabelRE.MatchString(v) {
			p.fail(DNSLabelName, v, "must be 3-63 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit")
		} else {
			o.DNSLabelName = &v
		}
	}
	o.PIPTags = p.pipTags()
	_, o.PIPIPTagsSet = p.get(PIPIPTags)
	for _, kv := range p.keyValues(PIPIPTags) {
		if kv[1] == "" {
			p.fail(PIPIPTags, kv[0]+"=", "entries must be IPTagType=Tag")
			continue
		}
		o.PIPIPTags = append(o.PIPIPTags, IPTag{Type: kv[0], Tag: kv[1]})
	}
	if v, ok := p.get(AdditionalPublicIPs); ok {
		for _, s := range list(v, ",") {
			if a := p.addr(AdditionalPublicIPs, s, false, false); a.IsValid() {
				o.AdditionalPublicIPs = append(o.AdditionalPublicIPs, a)
			}
		}
	}
	if v, ok := p.get(Mode); ok {
		o.Mode = v
	}
	// With a requested IP it is refused only where it means something: with several load
	// balancers (package placement), as the existing provider does.
	if v, ok := p.get(LoadBalancerConfigs); ok {
		for _, s := range list(v, ",") {
			o.Configurations = append(o.Configurations, strings.ToLower(s))
		}
	}

	if t := p.int32In(TCPIdleTimeout, MinIdleTimeoutMinutes, MaxIdleTimeoutMinutes); t != nil {
		o.IdleTimeoutMinutes = *t
	} else {
		o.IdleTimeoutMinutes = DefaultIdleTimeoutMinutes
	}
	o.DisableTCPReset = p.boolean(DisableTCPReset)
	o.DisableFloatingIP = p.boolean(DisableFloatingIP)
	// HA ports only exist on internal Standard LBs; the existing provider ignores it elsewhere.
	o.HAPorts = p.boolean(HAPorts) && o.Internal
	o.Probe = p.probe(ProbeProtocol, ProbeRequestPath, ProbeInterval, ProbeNumOfProbe)
	p.checkProbeTotal(o, nil, ProbeInterval)
	p.parsePorts(svc, o)

	p.parseAccess(svc, o)
	p.parsePLS(svc, o)

	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	o.Warnings, o.InvalidRanges = p.warnings, p.invalid
	return o, nil
}

func (p *parser) parseIPs(svc *v1.Service, o *ServiceOptions) {
	key4, key6 := IPv4, IPv6
	if v, ok := p.get(IPv4); ok && v != "" {
		o.IPv4 = p.addr(IPv4, v, true, false)
	}
	if v, ok := p.get(IPv6); ok && v != "" {
		o.IPv6 = p.addr(IPv6, v, false, true)
	}
	// spec.loadBalancerIP is the deprecated form; the family annotations win over it.
	if v := strings.TrimSpace(svc.Spec.LoadBalancerIP); v != "" {
		a := p.addr("spec.loadBalancerIP", v, false, false)
		switch {
		case !a.IsValid():
		case a.Is4() && !o.IPv4.IsValid():
			o.IPv4, key4 = a, "spec.loadBalancerIP"
		case a.Is6() && !o.IPv6.IsValid():
			o.IPv6, key6 = a, "spec.loadBalancerIP"
		}
	}
	if !o.Internal {
		o.IPv4 = p.publicIP(svc, key4, o.IPv4)
		o.IPv6 = p.publicIP(svc, key6, o.IPv6)
	}
}

// azureReserved are addresses of the Azure platform that no public IP has (the shared address
// space the platform uses, and the wire server).
var azureReserved = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("168.63.129.16/32")}

// publicIP refuses, on a public service, a requested address that no public IP can have
// (private, reserved, not unicast), before any public IP is looked up, with the existing
// provider's message. It returns a, or no address when refused.
func (p *parser) publicIP(svc *v1.Service, key string, a netip.Addr) netip.Addr {
	if !a.IsValid() || (a.IsGlobalUnicast() && !a.IsPrivate() && !slices.ContainsFunc(azureReserved, func(r netip.Prefix) bool { return r.Contains(a) })) {
		return a
	}
	p.errs = append(p.errs, &InvalidError{Annotation: key, Value: a.String(),
		Lead: fmt.Sprintf("external Service %q cannot use non-public LoadBalancer IP %q; use an internal LoadBalancer annotation or a valid Azure Public IP address",
			svc.Namespace+"/"+svc.Name, a.String()),
		Reason: fmt.Sprintf("%s=%s is a private, reserved or not a unicast address, which no public IP has", key, a)})
	return netip.Addr{}
}

func (p *parser) checkProbeTotal(o *ServiceOptions, port *int32, key string) {
	iv, n := o.ProbeInterval(port), o.ProbeThreshold(port)
	if int64(iv)*int64(n) >= MaxProbeTotalSeconds {
		p.fail(key, strconv.Itoa(int(iv)), "interval × number of probes (%d × %d) must be less than %d seconds", iv, n, MaxProbeTotalSeconds)
	}
}

// parsePorts reads the port_<port>_* annotations of the service's ports. Annotations naming a port
// the service does not have are ignored, as in the existing provider.
func (p *parser) parsePorts(svc *v1.Service, o *ServiceOptions) {
	for _, sp := range svc.Spec.Ports {
		port := sp.Port
		po := PortOptions{
			NoLBRule:    p.boolean(PortNoLBRuleKey(port)),
			NoProbeRule: p.boolean(PortNoProbeRuleKey(port)),
			Probe: p.probe(PortProbeKey(port, PortProbeProtocol), PortProbeKey(port, PortProbeRequestPath),
				PortProbeKey(port, PortProbeInterval), PortProbeKey(port, PortProbeNumOfProbe)),
		}
		if v, ok := p.get(PortProbeKey(port, PortProbePort)); ok && v != "" {
			key := PortProbeKey(port, PortProbePort)
			n, nerr := strconv.ParseInt(v, 10, 64)
			// The existing provider's messages open the errors: "failed to parse annotation
			// <key>: port <n> is out of range" and "…: port <name> not found in service".
			lead := "failed to parse annotation " + key + ": port " + v
			switch {
			case probePortExists(svc, v):
				po.Probe.Port = v
			case nerr == nil && n >= 1 && n <= 65535:
				// The existing provider probes a number that is no service port directly.
				po.Probe.Port = v
				p.warn(ReasonProbePortNotServicePort, key, v, "is not a port of the service; the load balancer probes port %d on the nodes directly", n)
			case nerr == nil:
				p.errs = append(p.errs, &InvalidError{Annotation: key, Value: v, Lead: lead + " is out of range",
					Reason: "a probe port is a port of the service (number or name) or a port number between 1 and 65535"})
			default:
				p.errs = append(p.errs, &InvalidError{Annotation: key, Value: v, Lead: lead + " not found in service",
					Reason: "a probe port is a port of the service (number or name) or a port number between 1 and 65535"})
			}
		}
		o.Ports[port] = po
		if po.Probe.Interval != nil || po.Probe.NumOfProbe != nil {
			pp := port
			p.checkProbeTotal(o, &pp, PortProbeKey(port, PortProbeInterval))
		}
	}
}

func probePortExists(svc *v1.Service, v string) bool {
	n, err := strconv.ParseInt(v, 10, 32)
	for _, sp := range svc.Spec.Ports {
		if (err == nil && int64(sp.Port) == n) || (err != nil && strings.EqualFold(sp.Name, v)) {
			return true
		}
	}
	return false
}

func (p *parser) parseAccess(svc *v1.Service, o *ServiceOptions) {
	if len(svc.Spec.LoadBalancerSourceRanges) > 0 {
		var vals []string
		for _, s := range svc.Spec.LoadBalancerSourceRanges {
			if s = strings.TrimSpace(s); s != "" {
				vals = append(vals, s)
			}
		}
		o.SourceRanges = p.prefixes("spec.loadBalancerSourceRanges", vals)
	} else if v, ok := p.get(CoreLBSourceRanges); ok {
		o.SourceRanges = p.prefixes(CoreLBSourceRanges, list(v, ","))
	}
	if v, ok := p.get(AllowedIPRanges); ok {
		o.AllowedIPRanges = p.prefixes(AllowedIPRanges, list(v, ","))
		if len(o.AllowedIPRanges) > 0 && len(svc.Spec.LoadBalancerSourceRanges) > 0 {
			p.fail(AllowedIPRanges, v, "cannot be combined with spec.loadBalancerSourceRanges")
		}
	}
	if v, ok := p.get(AllowedServiceTags); ok {
		for _, t := range list(v, ",") {
			if !serviceTagRE.MatchString(t) {
				p.fail(AllowedServiceTags, t, "not an Azure service tag")
				continue
			}
			o.AllowedServiceTags = append(o.AllowedServiceTags, t)
		}
	}
	o.DenyAllExceptSourceRanges = p.boolean(DenyAllExceptLBSources)
	o.DisableNSGRule = p.boolean(DisableNSGRule)
}

func (p *parser) parsePLS(svc *v1.Service, o *ServiceOptions) {
	pls := &o.PLS
	pls.Create = p.boolean(PLSCreate)
	pls.Name = p.name(PLSName, resourceNameRE, "private link service name")
	pls.ResourceGroup = p.name(PLSResourceGroup, resourceGroupRE, "resource group name")
	pls.Subnet = p.name(PLSSubnet, resourceNameRE, "subnet name")
	pls.IPAddressCount = DefaultPLSIPCount
	if n := p.int32In(PLSIPAddressCount, 1, MaxPLSIPCount); n != nil {
		pls.IPAddressCount = *n
	}
	for _, s := range p.fields(PLSIPAddresses) {
		if a := p.addr(PLSIPAddresses, s, false, false); a.IsValid() {
			pls.IPAddresses = append(pls.IPAddresses, a)
		}
	}
	if len(pls.IPAddresses) > int(pls.IPAddressCount) {
		p.fail(PLSIPAddresses, strings.Join(p.fields(PLSIPAddresses), " "), "lists more addresses than %s (%d)", PLSIPAddressCount, pls.IPAddressCount)
	}
	for _, f := range p.fields(PLSFQDNs) {
		if !fqdnRE.MatchString(f) {
			p.fail(PLSFQDNs, f, "not a DNS name")
			continue
		}
		pls.FQDNs = append(pls.FQDNs, f)
	}
	pls.ProxyProtocol = p.boolean(PLSProxyProtocol)
	vis := p.fields(PLSVisibility)
	for _, s := range vis {
		if s == "*" && len(vis) == 1 {
			pls.Visibility = []string{"*"}
			break
		}
		if !subscriptionRE.MatchString(s) {
			p.fail(PLSVisibility, s, "must be \"*\" alone or subscription IDs")
			continue
		}
		pls.Visibility = append(pls.Visibility, s)
	}
	for _, s := range p.fields(PLSAutoApproval) {
		if !subscriptionRE.MatchString(s) {
			p.fail(PLSAutoApproval, s, "not a subscription ID")
			continue
		}
		pls.AutoApproval = append(pls.AutoApproval, s)
	}
	switch {
	case pls.Create && !o.Internal && !o.DisableFloatingIP:
		// A PLS on a public frontend with floating IP keeps the frontend address as the
		// destination, which the nodes do not answer for PLS traffic.
		p.fail(PLSCreate, "true", "a private link service needs an internal load balancer (%s=true) or floating IP disabled (%s=true)", Internal, DisableFloatingIP)
	case pls.Create && !hasIPv4(svc):
		p.fail(PLSCreate, "true", "a private link service needs an IPv4 frontend; the service is IPv6 only")
	}
}

// hasIPv4 reports whether the service has an IPv4 family (none listed: IPv4, the default).
func hasIPv4(svc *v1.Service) bool {
	if len(svc.Spec.IPFamilies) == 0 {
		return true
	}
	return slices.Contains(svc.Spec.IPFamilies, v1.IPv4Protocol)
}
