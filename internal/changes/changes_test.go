package changes

import (
	"reflect"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

const lbID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/kubernetes"

func rule(name string, idle int32) *armnetwork.LoadBalancingRule {
	return &armnetwork.LoadBalancingRule{Name: to.Ptr(name), Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
		FrontendPort: to.Ptr[int32](80), IdleTimeoutInMinutes: to.Ptr(idle), ProvisioningState: to.Ptr(armnetwork.ProvisioningStateSucceeded)}}
}

func probe(name string, interval int32) *armnetwork.Probe {
	return &armnetwork.Probe{Name: to.Ptr(name), Properties: &armnetwork.ProbePropertiesFormat{Port: to.Ptr[int32](30080), IntervalInSeconds: to.Ptr(interval)}}
}

func frontend(name, pip string) *armnetwork.FrontendIPConfiguration {
	return &armnetwork.FrontendIPConfiguration{Name: to.Ptr(name), ID: to.Ptr(lbID + "/frontendIPConfigurations/" + name),
		Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{PublicIPAddress: &armnetwork.PublicIPAddress{
			ID: to.Ptr("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/" + pip)}}}
}

func pool(name string, members ...string) *armnetwork.BackendAddressPool {
	p := &armnetwork.BackendAddressPool{Name: to.Ptr(name), Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, m := range members {
		p.Properties.LoadBalancerBackendAddresses = append(p.Properties.LoadBalancerBackendAddresses, &armnetwork.LoadBalancerBackendAddress{
			Name: to.Ptr(m), Properties: &armnetwork.LoadBalancerBackendAddressPropertiesFormat{IPAddress: to.Ptr("10.0.0." + m[len(m)-1:])}})
	}
	return p
}

func lb(etag string, fes []*armnetwork.FrontendIPConfiguration, rules []*armnetwork.LoadBalancingRule, probes []*armnetwork.Probe,
	pools ...*armnetwork.BackendAddressPool) *armnetwork.LoadBalancer {
	return &armnetwork.LoadBalancer{ID: to.Ptr(lbID), Name: to.Ptr("kubernetes"), Etag: to.Ptr(etag), Location: to.Ptr("eastus"),
		Properties: &armnetwork.LoadBalancerPropertiesFormat{FrontendIPConfigurations: fes, LoadBalancingRules: rules, Probes: probes,
			BackendAddressPools: pools}}
}

func nsgRule(name string, dsts ...string) *armnetwork.SecurityRule {
	return &armnetwork.SecurityRule{Name: to.Ptr(name), Properties: &armnetwork.SecurityRulePropertiesFormat{
		Priority: to.Ptr[int32](500), DestinationAddressPrefixes: to.SliceOfPtrs(dsts...)}}
}

func TestDiff(t *testing.T) {
	fe := frontend("a1", "pip-a")
	for _, c := range []struct {
		name     string
		old, new any
		want     []Change
	}{
		{name: "equal, etags and provisioning states aside",
			old: lb("1", []*armnetwork.FrontendIPConfiguration{fe}, []*armnetwork.LoadBalancingRule{rule("a1-TCP-80", 4)}, nil),
			new: lb("2", []*armnetwork.FrontendIPConfiguration{fe}, []*armnetwork.LoadBalancingRule{rule("a1-TCP-80", 4)}, nil)},
		{name: "rule added back",
			old:  lb("1", []*armnetwork.FrontendIPConfiguration{fe}, nil, []*armnetwork.Probe{probe("a1-TCP-80", 5)}),
			new:  lb("1", []*armnetwork.FrontendIPConfiguration{fe}, []*armnetwork.LoadBalancingRule{rule("a1-TCP-80", 4)}, []*armnetwork.Probe{probe("a1-TCP-80", 5)}),
			want: []Change{{Collection: "loadBalancingRules", Name: "a1-TCP-80", Op: Added}}},
		{name: "probe changed and rule removed, matched by name whatever the case and order",
			old: lb("1", nil, []*armnetwork.LoadBalancingRule{rule("a1-TCP-80", 4), rule("b-TCP-80", 4)}, []*armnetwork.Probe{probe("A1-TCP-80", 10)}),
			new: lb("1", nil, []*armnetwork.LoadBalancingRule{rule("a1-TCP-80", 4)}, []*armnetwork.Probe{probe("a1-TCP-80", 5)}),
			want: []Change{
				{Collection: "loadBalancingRules", Name: "b-TCP-80", Op: Removed},
				{Collection: "probes", Name: "a1-TCP-80", Op: Changed, Fields: []Field{{Path: "properties.intervalInSeconds", Old: "10", New: "5"}}},
			}},
		{name: "frontend public IP changed: the reference is shown by type and name",
			old: lb("1", []*armnetwork.FrontendIPConfiguration{frontend("a1", "other")}, nil, nil),
			new: lb("1", []*armnetwork.FrontendIPConfiguration{fe}, nil, nil),
			want: []Change{{Collection: "frontendIPConfigurations", Name: "a1", Op: Changed, Fields: []Field{{Path: "properties.publicIPAddress.id",
				Old: "Microsoft.Network/publicIPAddresses/other", New: "Microsoft.Network/publicIPAddresses/pip-a"}}}}},
		{name: "pool member added back is a nested child of the pool",
			old: lb("1", nil, nil, nil, pool("kubernetes", "n1")),
			new: lb("1", nil, nil, nil, pool("kubernetes", "n1", "n2")),
			want: []Change{{Collection: "backendAddressPools", Name: "kubernetes", Op: Changed,
				Fields: []Field{{Path: "properties.loadBalancerBackendAddresses[n2]", New: "added"}}}}},
		{name: "last pool member removed",
			old: lb("1", nil, nil, nil, pool("kubernetes", "n1")),
			new: lb("1", nil, nil, nil, pool("kubernetes")),
			want: []Change{{Collection: "backendAddressPools", Name: "kubernetes", Op: Changed,
				Fields: []Field{{Path: "properties.loadBalancerBackendAddresses[n1]", Old: "present", New: "removed"}}}}},
		{name: "NSG rule destinations: the added and removed addresses",
			old: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{
				nsgRule("allow", "203.0.113.1", "203.0.113.2")}}},
			new: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{
				nsgRule("allow", "203.0.113.2", "203.0.113.3")}}},
			want: []Change{{Collection: "securityRules", Name: "allow", Op: Changed, Fields: []Field{{Path: "properties.destinationAddressPrefixes",
				Added: []string{"203.0.113.3"}, Removed: []string{"203.0.113.1"}}}}}},
		{name: "NSG rule removed by a third party and added back",
			old: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{}},
			new: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{
				nsgRule("allow", "203.0.113.1")}}},
			want: []Change{{Collection: "securityRules", Name: "allow", Op: Added}}},
		{name: "resource created: its own fields and every child",
			old:  nil,
			new:  &armnetwork.PublicIPAddress{Name: to.Ptr("kubernetes-a1"), Tags: map[string]*string{"k8s-azure-service": to.Ptr("default/web")}},
			want: []Change{{Op: Changed, Fields: []Field{{Path: "name", New: "kubernetes-a1"}, {Path: "tags.k8s-azure-service", New: "default/web"}}}}},
		{name: "own field removed",
			old:  &armnetwork.PublicIPAddress{Tags: map[string]*string{"k8s-azure-dns-label-service": to.Ptr("default/web")}},
			new:  &armnetwork.PublicIPAddress{Tags: map[string]*string{}},
			want: []Change{{Op: Changed, Fields: []Field{{Path: "tags.k8s-azure-dns-label-service", Old: "default/web"}}}}},
		{name: "missing and empty lists are the same",
			old: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{}},
			new: &armnetwork.SecurityGroup{Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Diff(c.old, c.new)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("Diff:\n got %#v\nwant %#v", got, c.want)
			}
		})
	}
}

func TestFieldString(t *testing.T) {
	for _, c := range []struct {
		f    Field
		want string
	}{
		{Field{Path: "properties.intervalInSeconds", Old: "10", New: "5"}, "properties.intervalInSeconds 10 → 5"},
		{Field{Path: "tags.x", New: "y"}, "tags.x = y"},
		{Field{Path: "tags.x", Old: "y"}, "tags.x y → (unset)"},
		{Field{Path: "p", Added: []string{"a"}, Removed: []string{"b"}}, "p +a -b"},
	} {
		if got := c.f.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'x'
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb/probes/p", "Microsoft.Network/loadBalancers/lb/probes/p"},
		{"plain", "plain"},
		{map[string]any{"id": "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses/p"}, "Microsoft.Network/publicIPAddresses/p"},
		{float64(5), "5"},
		{true, "true"},
		{string(long), string(long[:maxRender-1]) + "…"},
	} {
		if got := Render(c.v); got != c.want {
			t.Errorf("Render(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestKind(t *testing.T) {
	for _, c := range []struct {
		typ  string
		c    Change
		want string
	}{
		{"Microsoft.Network/loadBalancers", Change{Collection: "frontendIPConfigurations"}, "frontend"},
		{"Microsoft.Network/loadBalancers", Change{Collection: "loadBalancingRules"}, "rule"},
		{"Microsoft.Network/loadBalancers", Change{Collection: "probes"}, "probe"},
		{"Microsoft.Network/loadBalancers", Change{Collection: "backendAddressPools"}, "pool_member"},
		{"Microsoft.Network/loadBalancers", Change{Collection: "outboundRules"}, "other"},
		{"Microsoft.Network/loadBalancers", Change{}, "other"},
		{"Microsoft.Network/networkSecurityGroups", Change{Collection: "securityRules"}, "nsg_rule"},
		{"Microsoft.Network/publicIPAddresses", Change{}, "public_ip"},
		{"Microsoft.Network/networkInterfaces", Change{Collection: "ipConfigurations"}, "pool_member"},
		{"Microsoft.Compute/virtualMachineScaleSets/virtualMachines", Change{Collection: "networkInterfaceConfigurations"}, "pool_member"},
		{"Microsoft.Network/routeTables", Change{Collection: "routes"}, "route"},
	} {
		if got := Kind(c.typ, c.c); got != c.want {
			t.Errorf("Kind(%s, %s) = %s, want %s", c.typ, c.c.Collection, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	many := Change{Collection: "probes", Name: "p", Op: Changed}
	for i := range 6 {
		many.Fields = append(many.Fields, Field{Path: string(rune('a' + i)), Old: "1", New: "2"})
	}
	for _, c := range []struct {
		c    Change
		want string
	}{
		{Change{Collection: "loadBalancingRules", Name: "a1-TCP-80", Op: Added}, "loadBalancingRules a1-TCP-80 added"},
		{Change{Collection: "probes", Name: "a1-TCP-80", Op: Changed, Fields: []Field{{Path: "properties.intervalInSeconds", Old: "10", New: "5"}}},
			"probes a1-TCP-80 changed (properties.intervalInSeconds 10 → 5)"},
		{Change{Op: Changed, Fields: []Field{{Path: "tags.x", New: "y"}}}, "resource changed (tags.x = y)"},
		{many, "probes p changed (a 1 → 2; b 1 → 2; c 1 → 2; d 1 → 2; and 2 more)"},
	} {
		if got := Describe(c.c); got != c.want {
			t.Errorf("Describe = %q, want %q", got, c.want)
		}
	}
}
