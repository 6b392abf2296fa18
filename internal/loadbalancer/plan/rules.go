package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// ruleSpec and probeSpec are the managed fields of one rule or probe; they are written onto the
// existing SDK objects so read-only fields survive and an unchanged LB compares equal.
type ruleSpec struct {
	name                      string
	protocol                  armnetwork.TransportProtocol
	frontendPort, backendPort int32
	floatingIP                bool
	tcpReset                  *bool
	idleTimeout               int32
	loadDistribution          armnetwork.LoadDistribution
	disableOutboundSNAT       bool
	frontendID, poolID        string
	probeName                 string // "" for no probe
}

type probeSpec struct {
	name      string
	protocol  armnetwork.ProbeProtocol
	port      int32
	path      string // Http(s) only
	interval  int32
	threshold int32
}

func transportProtocol(p v1.Protocol) (armnetwork.TransportProtocol, error) {
	switch p {
	case v1.ProtocolTCP, "":
		return armnetwork.TransportProtocolTCP, nil
	case v1.ProtocolUDP:
		return armnetwork.TransportProtocolUDP, nil
	case v1.ProtocolSCTP:
		return armnetwork.TransportProtocolAll, nil
	}
	return "", fmt.Errorf("unsupported protocol %q", p)
}

// probeProtocol resolves a port's probe protocol: the per-port annotation, then appProtocol, then
// the global annotation, then Tcp. Unknown appProtocol values fall back to Tcp, as before.
func probeProtocol(o *annotations.ServiceOptions, port v1.ServicePort) armnetwork.ProbeProtocol {
	p := o.Port(port.Port).Probe.Protocol
	if p == "" && port.AppProtocol != nil {
		p = strings.TrimSpace(*port.AppProtocol)
	}
	if p == "" {
		p = o.Probe.Protocol
	}
	switch {
	case eqFold(p, annotations.ProbeHTTP):
		return armnetwork.ProbeProtocolHTTP
	case eqFold(p, annotations.ProbeHTTPS):
		return armnetwork.ProbeProtocolHTTPS
	}
	return armnetwork.ProbeProtocolTCP
}

// portProbe is the probe of one port when the service has no node health check, or nil (UDP/SCTP).
func portProbe(s *Service, port v1.ServicePort, name string) *probeSpec {
	if port.Protocol == v1.ProtocolUDP || port.Protocol == v1.ProtocolSCTP {
		return nil
	}
	o := s.Opts
	ps := &probeSpec{name: name, protocol: probeProtocol(o, port), port: port.NodePort}
	if ref := o.Port(port.Port).Probe.Port; ref != "" {
		n, err := strconv.ParseInt(ref, 10, 32)
		found := false
		for _, sp := range s.Svc.Spec.Ports {
			if (err == nil && int64(sp.Port) == n) || (err != nil && eqFold(sp.Name, ref)) {
				ps.port, found = sp.NodePort, true
			}
		}
		if !found && err == nil {
			// A number that is no service port is probed directly on the nodes (the existing
			// provider's reading; the parser warned about it).
			ps.port = int32(n)
		}
	}
	if ps.protocol != armnetwork.ProbeProtocolTCP {
		ps.path = annotations.DefaultProbeHTTPPath
		if p := o.Port(port.Port).Probe.RequestPath; p != nil {
			ps.path = *p
		} else if o.Probe.RequestPath != nil {
			ps.path = *o.Probe.RequestPath
		}
	}
	pp := port.Port
	ps.interval, ps.threshold = o.ProbeInterval(&pp), o.ProbeThreshold(&pp)
	return ps
}

// desiredRules computes the rules and probes of one service on one frontend.
func desiredRules(c *Cluster, lbName string, s *Service, f naming.Family, frontendID string) ([]ruleSpec, []probeSpec, error) {
	var (
		o       = s.Opts
		dual    = s.DualStack()
		poolID  = c.childID(lbName, "backendAddressPools", s.PoolName(c, f))
		rules   []ruleSpec
		probes  []probeSpec
		localHC *probeSpec
		ports   = s.Svc.Spec.Ports
	)
	if len(ports) == 0 {
		return nil, nil, nil
	}
	// kube-proxy answers the health check of Local services; PLS proxy protocol cannot carry it.
	if s.IsLocal() && !(o.PLS.Create && o.PLS.ProxyProtocol) {
		hc := s.Svc.Spec.HealthCheckNodePort
		localHC = &probeSpec{
			name:      naming.RuleName(s.LBName(), s.Subnet(), v1.ProtocolTCP, hc, dual, f),
			protocol:  armnetwork.ProbeProtocolHTTP,
			port:      hc,
			path:      annotations.LocalHealthCheckPath,
			interval:  o.ProbeInterval(nil),
			threshold: o.ProbeThreshold(nil),
		}
	}
	shared := c.SharedProbe && localHC == nil
	base := func(port v1.ServicePort, name string) (ruleSpec, error) {
		proto, err := transportProtocol(port.Protocol)
		if err != nil {
			return ruleSpec{}, err
		}
		r := ruleSpec{
			name: name, protocol: proto, frontendPort: port.Port, backendPort: port.Port,
			floatingIP: true, idleTimeout: o.IdleTimeoutMinutes,
			loadDistribution:    armnetwork.LoadDistributionDefault,
			disableOutboundSNAT: c.DisableOutboundSNAT, frontendID: frontendID, poolID: poolID,
		}
		if s.Svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			r.loadDistribution = armnetwork.LoadDistributionSourceIP
		}
		if proto == armnetwork.TransportProtocolTCP {
			r.tcpReset = to.Ptr(!o.DisableTCPReset)
		}
		// Without floating IP (and on internal IPv6, where secondary IPs cannot float) traffic goes
		// to nodeIP:nodePort.
		if o.DisableFloatingIP || (o.Internal && f == naming.IPv6) {
			r.backendPort, r.floatingIP = port.NodePort, false
		}
		return r, nil
	}
	attachProbe := func(r *ruleSpec, port v1.ServicePort) {
		switch {
		case o.Port(port.Port).NoProbeRule:
		case localHC != nil:
			r.probeName = localHC.name
		case shared:
			r.probeName = naming.SharedProbeName
		default:
			if p := portProbe(s, port, r.name); p != nil {
				r.probeName = p.name
				probes = append(probes, *p)
			}
		}
	}

	if o.HAPorts {
		// One All-protocol rule on port 0, named after the first port.
		first := ports[0]
		r, err := base(first, naming.RuleName(s.LBName(), s.Subnet(), first.Protocol, first.Port, dual, f))
		if err != nil {
			return nil, nil, err
		}
		r.protocol, r.frontendPort, r.backendPort, r.tcpReset = armnetwork.TransportProtocolAll, 0, 0, to.Ptr(!o.DisableTCPReset)
		switch {
		case localHC != nil:
			r.probeName = localHC.name
		case shared:
			r.probeName = naming.SharedProbeName
		default:
			for _, port := range ports {
				if o.Port(port.Port).NoProbeRule {
					continue
				}
				if p := portProbe(s, port, r.name); p != nil {
					r.probeName = p.name
					probes = append(probes, *p)
					break
				}
			}
		}
		rules = append(rules, r)
	} else {
		for _, port := range ports {
			if o.Port(port.Port).NoLBRule {
				continue
			}
			r, err := base(port, naming.RuleName(s.LBName(), s.Subnet(), port.Protocol, port.Port, dual, f))
			if err != nil {
				return nil, nil, err
			}
			attachProbe(&r, port)
			rules = append(rules, r)
		}
	}
	if localHC != nil {
		used := false
		for _, r := range rules {
			used = used || r.probeName == localHC.name
		}
		if used {
			probes = append(probes, *localHC)
		}
	}
	return rules, probes, nil
}

// writeRule sets the managed fields of r from spec.
func writeRule(c *Cluster, lbName string, r *armnetwork.LoadBalancingRule, spec ruleSpec) {
	r.Name = to.Ptr(spec.name)
	if r.Properties == nil {
		r.Properties = &armnetwork.LoadBalancingRulePropertiesFormat{}
	}
	p := r.Properties
	p.Protocol = to.Ptr(spec.protocol)
	p.FrontendPort = to.Ptr(spec.frontendPort)
	p.BackendPort = to.Ptr(spec.backendPort)
	p.EnableFloatingIP = to.Ptr(spec.floatingIP)
	p.EnableTCPReset = spec.tcpReset
	p.IdleTimeoutInMinutes = to.Ptr(spec.idleTimeout)
	p.LoadDistribution = to.Ptr(spec.loadDistribution)
	p.DisableOutboundSnat = to.Ptr(spec.disableOutboundSNAT)
	p.FrontendIPConfiguration = &armnetwork.SubResource{ID: to.Ptr(spec.frontendID)}
	p.BackendAddressPool = &armnetwork.SubResource{ID: to.Ptr(spec.poolID)}
	if len(p.BackendAddressPools) > 0 {
		p.BackendAddressPools = []*armnetwork.SubResource{{ID: to.Ptr(spec.poolID)}}
	}
	if spec.probeName != "" {
		p.Probe = &armnetwork.SubResource{ID: to.Ptr(c.childID(lbName, "probes", spec.probeName))}
	} else {
		p.Probe = nil
	}
}

// writeProbe sets the managed fields of p from spec.
func writeProbe(p *armnetwork.Probe, spec probeSpec) {
	p.Name = to.Ptr(spec.name)
	if p.Properties == nil {
		p.Properties = &armnetwork.ProbePropertiesFormat{}
	}
	pp := p.Properties
	pp.Protocol = to.Ptr(spec.protocol)
	pp.Port = to.Ptr(spec.port)
	pp.IntervalInSeconds = to.Ptr(spec.interval)
	pp.ProbeThreshold = to.Ptr(spec.threshold)
	if spec.path != "" {
		pp.RequestPath = to.Ptr(spec.path)
	} else {
		pp.RequestPath = nil
	}
}

func sharedProbeSpec(c *Cluster) probeSpec {
	port, path := c.SharedProbePort, c.SharedProbePath
	if port == 0 {
		port = 10256
	}
	if path == "" {
		path = "/healthz"
	}
	return probeSpec{name: naming.SharedProbeName, protocol: armnetwork.ProbeProtocolHTTP, port: port, path: path,
		interval: annotations.DefaultProbeInterval, threshold: annotations.DefaultProbeThreshold}
}
