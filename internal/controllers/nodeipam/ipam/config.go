package ipam

import (
	"fmt"
	"net/netip"
	"strings"
)

// Allocator types of --cidr-allocator-type.
const (
	RangeAllocator = "RangeAllocator"
	CloudAllocator = "CloudAllocator"
)

// Default node subnet masks (the existing provider's and kube-controller-manager's).
const (
	DefaultMaskIPv4 = 24
	DefaultMaskIPv6 = 64
)

// Flags are the command-line settings of node CIDR allocation.
type Flags struct {
	// AllocatorType is --cidr-allocator-type.
	AllocatorType string
	// ClusterCIDR is --cluster-cidr: one CIDR, or an IPv4 and an IPv6 one separated by a comma.
	ClusterCIDR string
	// ServiceCIDR is --service-cluster-ip-range (one or two CIDRs); node subnets overlapping it
	// are never handed out.
	ServiceCIDR string
	// MaskSize is --node-cidr-mask-size (0: not given); MaskSizeIPv4/IPv6 are
	// --node-cidr-mask-size-ipv4/-ipv6 (0: not given).
	MaskSize, MaskSizeIPv4, MaskSizeIPv6 int
}

// Plan turns the flags into pool specs, primary family first (the order of --cluster-cidr).
// Warnings are settings accepted but not applied. Errors name the flag at fault.
//
// Mask sizes: --node-cidr-mask-size-ipv4 / -ipv6 when given; else --node-cidr-mask-size in a
// single-stack cluster; else 24 / 64. In a dual-stack cluster --node-cidr-mask-size is ignored
// with a warning (it cannot say which family it means), as the existing provider does.
func Plan(f Flags) (specs []Spec, warnings []string, err error) {
	switch f.AllocatorType {
	case "", RangeAllocator:
	case CloudAllocator:
		return nil, nil, fmt.Errorf("--cidr-allocator-type=%s is not supported: it takes each node's mask size from "+
			"kubernetesNodeCIDRMaskIPV4/IPV6 tags on its scale set or availability set; use %s with "+
			"--node-cidr-mask-size-ipv4/--node-cidr-mask-size-ipv6 (one mask size per family for the whole cluster)",
			CloudAllocator, RangeAllocator)
	default:
		return nil, nil, fmt.Errorf("--cidr-allocator-type=%q is unknown (want %s)", f.AllocatorType, RangeAllocator)
	}
	if strings.TrimSpace(f.ClusterCIDR) == "" {
		return nil, nil, fmt.Errorf("--allocate-node-cidrs needs --cluster-cidr")
	}
	clusters, err := parseList("--cluster-cidr", f.ClusterCIDR)
	if err != nil {
		return nil, nil, err
	}
	if len(clusters) == 2 && clusters[0].Addr().Is4() == clusters[1].Addr().Is4() {
		return nil, nil, fmt.Errorf("--cluster-cidr=%s: two CIDRs must be one IPv4 and one IPv6", f.ClusterCIDR)
	}
	var services []netip.Prefix
	if strings.TrimSpace(f.ServiceCIDR) != "" {
		if services, err = parseList("--service-cluster-ip-range", f.ServiceCIDR); err != nil {
			return nil, nil, err
		}
		if len(services) == 2 && services[0].Addr().Is4() == services[1].Addr().Is4() {
			return nil, nil, fmt.Errorf("--service-cluster-ip-range=%s: two CIDRs must be one IPv4 and one IPv6", f.ServiceCIDR)
		}
	}
	for name, v := range map[string]int{"--node-cidr-mask-size": f.MaskSize, "--node-cidr-mask-size-ipv4": f.MaskSizeIPv4,
		"--node-cidr-mask-size-ipv6": f.MaskSizeIPv6} {
		if v < 0 {
			return nil, nil, fmt.Errorf("%s=%d: must be positive", name, v)
		}
	}
	dual := len(clusters) == 2
	if dual && f.MaskSize != 0 {
		warnings = append(warnings, fmt.Sprintf("--node-cidr-mask-size=%d is ignored in a dual-stack cluster; "+
			"--node-cidr-mask-size-ipv4/-ipv6 set the mask sizes", f.MaskSize))
	}
	for _, c := range clusters {
		v4 := c.Addr().Is4()
		bits, flag := DefaultMaskIPv4, "--node-cidr-mask-size-ipv4"
		if !v4 {
			bits, flag = DefaultMaskIPv6, "--node-cidr-mask-size-ipv6"
		}
		switch {
		case v4 && f.MaskSizeIPv4 != 0:
			bits = f.MaskSizeIPv4
		case !v4 && f.MaskSizeIPv6 != 0:
			bits = f.MaskSizeIPv6
		case !dual && f.MaskSize != 0:
			bits, flag = f.MaskSize, "--node-cidr-mask-size"
		}
		if !dual {
			if v4 && f.MaskSizeIPv6 != 0 {
				warnings = append(warnings, fmt.Sprintf("--node-cidr-mask-size-ipv6=%d is ignored: the cluster CIDR is IPv4 only", f.MaskSizeIPv6))
			}
			if !v4 && f.MaskSizeIPv4 != 0 {
				warnings = append(warnings, fmt.Sprintf("--node-cidr-mask-size-ipv4=%d is ignored: the cluster CIDR is IPv6 only", f.MaskSizeIPv4))
			}
		}
		if _, err := NewPool(c, bits); err != nil {
			return nil, nil, fmt.Errorf("%s=%d with --cluster-cidr %s: %w", flag, bits, c, err)
		}
		s := Spec{Cluster: c, NodeBits: bits}
		for _, svc := range services {
			if svc.Addr().Is4() == v4 && svc.Overlaps(c) {
				s.Reserved = append(s.Reserved, svc)
			}
		}
		specs = append(specs, s)
	}
	return specs, warnings, nil
}

func parseList(flag, value string) ([]netip.Prefix, error) {
	parts := strings.Split(value, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%s=%s: at most two CIDRs (one per IP family)", flag, value)
	}
	var out []netip.Prefix
	for _, s := range parts {
		c, err := parseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %q is not a CIDR: %w", flag, value, strings.TrimSpace(s), err)
		}
		out = append(out, c)
	}
	return out, nil
}
