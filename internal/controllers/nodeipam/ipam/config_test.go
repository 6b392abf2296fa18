package ipam

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	spec := func(s Spec) string {
		out := fmt.Sprintf("%s@%d", s.Cluster, s.NodeBits)
		for _, r := range s.Reserved {
			out += " -" + r.String()
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		flags    Flags
		want     []string
		warnings []string
		err      string
	}{
		{name: "IPv4 defaults to /24", flags: Flags{ClusterCIDR: "10.244.0.0/16"}, want: []string{"10.244.0.0/16@24"}},
		{name: "IPv6 defaults to /64", flags: Flags{ClusterCIDR: "fd00:10:244::/56"}, want: []string{"fd00:10:244::/56@64"}},
		{name: "explicit RangeAllocator", flags: Flags{AllocatorType: "RangeAllocator", ClusterCIDR: "10.244.0.0/16"}, want: []string{"10.244.0.0/16@24"}},
		{name: "--node-cidr-mask-size in a single-stack cluster", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSize: 26},
			want: []string{"10.244.0.0/16@26"}},
		{name: "the family flag wins over --node-cidr-mask-size", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSize: 26, MaskSizeIPv4: 25},
			want: []string{"10.244.0.0/16@25"}},
		{name: "IPv6 single stack with --node-cidr-mask-size", flags: Flags{ClusterCIDR: "fd00::/48", MaskSize: 80},
			want: []string{"fd00::/48@80"}},
		{name: "the other family's flag is ignored with a warning", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSizeIPv6: 80},
			want:     []string{"10.244.0.0/16@24"},
			warnings: []string{"--node-cidr-mask-size-ipv6=80 is ignored: the cluster CIDR is IPv4 only"}},
		{name: "dual-stack, order kept", flags: Flags{ClusterCIDR: "fd00::/48, 10.244.0.0/16", MaskSizeIPv4: 25, MaskSizeIPv6: 72},
			want: []string{"fd00::/48@72", "10.244.0.0/16@25"}},
		{name: "dual-stack ignores --node-cidr-mask-size", flags: Flags{ClusterCIDR: "10.244.0.0/16,fd00::/48", MaskSize: 26},
			want:     []string{"10.244.0.0/16@24", "fd00::/48@64"},
			warnings: []string{"--node-cidr-mask-size=26 is ignored in a dual-stack cluster; --node-cidr-mask-size-ipv4/-ipv6 set the mask sizes"}},
		{name: "service range inside the cluster CIDR is reserved", flags: Flags{ClusterCIDR: "10.0.0.0/8,fd00::/48",
			ServiceCIDR: "10.96.0.0/12,fd00:0:0:ff::/108"},
			want: []string{"10.0.0.0/8@24 -10.96.0.0/12", "fd00::/48@64 -fd00:0:0:ff::/108"}},
		{name: "service range elsewhere is not", flags: Flags{ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/12"},
			want: []string{"10.244.0.0/16@24"}},
		{name: "host bits are dropped", flags: Flags{ClusterCIDR: "10.244.1.7/16"}, want: []string{"10.244.0.0/16@24"}},

		{name: "CloudAllocator is refused with the reason", flags: Flags{AllocatorType: "CloudAllocator", ClusterCIDR: "10.244.0.0/16"},
			err: "--cidr-allocator-type=CloudAllocator is not supported"},
		{name: "unknown allocator", flags: Flags{AllocatorType: "IPAMFromCluster", ClusterCIDR: "10.244.0.0/16"},
			err: `--cidr-allocator-type="IPAMFromCluster" is unknown`},
		{name: "no cluster CIDR", flags: Flags{}, err: "--allocate-node-cidrs needs --cluster-cidr"},
		{name: "not a CIDR", flags: Flags{ClusterCIDR: "10.244.0.0"}, err: `--cluster-cidr=10.244.0.0: "10.244.0.0" is not a CIDR`},
		{name: "three CIDRs", flags: Flags{ClusterCIDR: "10.0.0.0/16,10.1.0.0/16,fd00::/48"}, err: "at most two CIDRs"},
		{name: "two of one family", flags: Flags{ClusterCIDR: "10.0.0.0/16,10.1.0.0/16"}, err: "must be one IPv4 and one IPv6"},
		{name: "mask shorter than the cluster CIDR", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSizeIPv4: 15},
			err: "--node-cidr-mask-size-ipv4=15 with --cluster-cidr 10.244.0.0/16: node mask /15 is shorter"},
		{name: "mask longer than an address", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSize: 33},
			err: "--node-cidr-mask-size=33 with --cluster-cidr 10.244.0.0/16"},
		{name: "negative mask", flags: Flags{ClusterCIDR: "10.244.0.0/16", MaskSizeIPv6: -1}, err: "--node-cidr-mask-size-ipv6=-1: must be positive"},
		{name: "bad service range", flags: Flags{ClusterCIDR: "10.244.0.0/16", ServiceCIDR: "10.96.0.0/33"},
			err: "--service-cluster-ip-range=10.96.0.0/33"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, warnings, err := Plan(tc.flags)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, g := range got {
				s = append(s, spec(g))
			}
			if !reflect.DeepEqual(s, tc.want) {
				t.Errorf("specs %v, want %v", s, tc.want)
			}
			if !reflect.DeepEqual(warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", warnings, tc.warnings)
			}
		})
	}
}
