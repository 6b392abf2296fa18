package migration

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

const (
	sub = "/subscriptions/s/resourceGroups/rg/providers/"
	cl  = "kubernetes"
)

func lbID(name string) string  { return sub + "Microsoft.Network/loadBalancers/" + name }
func pipID(name string) string { return sub + "Microsoft.Network/publicIPAddresses/" + name }
func nicCfg(vm string) string {
	return sub + "Microsoft.Network/networkInterfaces/" + vm + "-nic/ipConfigurations/ipconfig1"
}
func vmssCfg(ss, i string) string {
	return sub + "Microsoft.Compute/virtualMachineScaleSets/" + ss + "/virtualMachines/" + i + "/networkInterfaces/" + ss + "/ipConfigurations/ipconfig1"
}
func ssID(name string) string { return sub + "Microsoft.Compute/virtualMachineScaleSets/" + name }

// fe is a frontend: pip != "" for public, else ip is the private address.
type fe struct{ name, pip, ip string }

func lb(name, sku string, fes []fe, members ...string) *armnetwork.LoadBalancer {
	l := &armnetwork.LoadBalancer{ID: to.Ptr(lbID(name)), Name: to.Ptr(name), Properties: &armnetwork.LoadBalancerPropertiesFormat{}}
	if sku != "" {
		l.SKU = &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUName(sku))}
	}
	for _, f := range fes {
		p := &armnetwork.FrontendIPConfigurationPropertiesFormat{}
		if f.pip != "" {
			p.PublicIPAddress = &armnetwork.PublicIPAddress{ID: to.Ptr(pipID(f.pip))}
		} else {
			p.PrivateIPAddress = to.Ptr(f.ip)
		}
		l.Properties.FrontendIPConfigurations = append(l.Properties.FrontendIPConfigurations,
			&armnetwork.FrontendIPConfiguration{ID: to.Ptr(lbID(name) + "/frontendIPConfigurations/" + f.name), Name: to.Ptr(f.name), Properties: p})
	}
	pool := &armnetwork.BackendAddressPool{ID: to.Ptr(lbID(name) + "/backendAddressPools/" + cl), Name: to.Ptr(cl),
		Properties: &armnetwork.BackendAddressPoolPropertiesFormat{}}
	for _, m := range members {
		pool.Properties.BackendIPConfigurations = append(pool.Properties.BackendIPConfigurations, &armnetwork.InterfaceIPConfiguration{ID: to.Ptr(m)})
	}
	l.Properties.BackendAddressPools = []*armnetwork.BackendAddressPool{pool}
	return l
}

func pip(name, sku, method, ip, owner string) *armnetwork.PublicIPAddress {
	p := &armnetwork.PublicIPAddress{ID: to.Ptr(pipID(name)), Name: to.Ptr(name),
		SKU: &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUName(sku))},
		Properties: &armnetwork.PublicIPAddressPropertiesFormat{
			PublicIPAllocationMethod: to.Ptr(armnetwork.IPAllocationMethod(method)),
		}}
	if ip != "" {
		p.Properties.IPAddress = to.Ptr(ip)
	}
	if owner != "" {
		p.Properties.IPConfiguration = &armnetwork.IPConfiguration{ID: to.Ptr(owner)}
	}
	return p
}

func svc(name, uid string, internal bool, ip string) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID(uid), Annotations: map[string]string{}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer}}
	if internal {
		s.Annotations[annotations.Internal] = "true"
	}
	if ip != "" {
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip}}
	}
	return s
}

func frontName(uid string) string { return naming.ServiceLBName(types.UID(uid)) }

func scaleSet(name string, pools ...string) *armcompute.VirtualMachineScaleSet {
	ic := &armcompute.VirtualMachineScaleSetIPConfiguration{Name: to.Ptr("ipconfig1"), Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{Primary: to.Ptr(true)}}
	for _, p := range pools {
		ic.Properties.LoadBalancerBackendAddressPools = append(ic.Properties.LoadBalancerBackendAddressPools, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	return &armcompute.VirtualMachineScaleSet{ID: to.Ptr(ssID(name)), Name: to.Ptr(name), Properties: &armcompute.VirtualMachineScaleSetProperties{
		VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
			NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{Name: to.Ptr(name),
				Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{Primary: to.Ptr(true),
					IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{ic}}}}}}}}
}

// summary renders a plan as "phase target" lines (targets shortened to their last segments).
func summary(p *Plan) []string {
	var out []string
	for _, s := range p.Steps {
		t := s.Target
		if i := strings.Index(t, "/providers/"); i >= 0 {
			parts := strings.Split(t[i:], "/")
			t = parts[len(parts)-1]
			if s.Edit != nil && s.Edit.ScaleSet != "" {
				t = s.Edit.ScaleSet + "/" + s.Edit.InstanceID
			}
		}
		out = append(out, s.Phase.String()+" "+t)
	}
	return out
}

const (
	uidA = "aaaaaaaa-0000-0000-0000-000000000001" // public on kubernetes
	uidB = "bbbbbbbb-0000-0000-0000-000000000002" // internal on kubernetes-internal
	uidC = "cccccccc-0000-0000-0000-000000000003" // public on the per-VM-set LB pool1
)

// basicCluster is the estate the Basic mode leaves: the primary LBs (availability set nodes) and
// one per-VM-set LB (scale set pool1), NIC-based pools, Basic public IPs.
func basicCluster() Input {
	pub := lb("kubernetes", "Basic", []fe{{name: frontName(uidA), pip: "kubernetes-" + frontName(uidA)}}, nicCfg("as-vm-0"), nicCfg("as-vm-1"))
	intl := lb("kubernetes-internal", "Basic", []fe{{name: frontName(uidB), ip: "10.240.0.50"}}, nicCfg("as-vm-0"), nicCfg("as-vm-1"))
	pool1 := lb("pool1", "", []fe{{name: frontName(uidC), pip: "kubernetes-" + frontName(uidC)}}, vmssCfg("pool1", "0"), vmssCfg("pool1", "1"))
	return Input{
		ClusterName: cl, VMSets: []string{"as", "POOL1"},
		LoadBalancers: []*armnetwork.LoadBalancer{pub, intl, pool1,
			lb("someone-else", "Basic", nil, nicCfg("other"))},
		PublicIPs: []*armnetwork.PublicIPAddress{
			pip("kubernetes-"+frontName(uidA), "Basic", "Static", "203.0.113.10", lbID("kubernetes")+"/frontendIPConfigurations/"+frontName(uidA)),
			pip("kubernetes-"+frontName(uidC), "Basic", "Dynamic", "203.0.113.11", lbID("pool1")+"/frontendIPConfigurations/"+frontName(uidC)),
			pip("unrelated", "Basic", "Dynamic", "", ""),
		},
		ScaleSets: []*armcompute.VirtualMachineScaleSet{scaleSet("pool1", lbID("pool1")+"/backendAddressPools/"+cl), scaleSet("pool2")},
		Services: []*v1.Service{
			svc("a", uidA, false, "203.0.113.10"),
			svc("b", uidB, true, "10.240.0.50"),
			svc("c", uidC, false, "203.0.113.11"),
			svc("pending", "dddddddd-0000-0000-0000-000000000004", false, ""),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cluster-ip", UID: "e"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP}},
		},
	}
}

func TestBuild(t *testing.T) {
	type check func(t *testing.T, p *Plan)
	cases := []struct {
		name  string
		input func() Input
		want  []string
		check check
	}{
		{
			name:  "Basic cluster: every phase in order, only the cluster's load balancers",
			input: basicCluster,
			want: []string{
				"static-pips kubernetes-" + frontName(uidC),
				"detach-models pool1",
				"detach-nodes pool1/0", "detach-nodes pool1/1",
				"detach-nodes as-vm-0-nic", "detach-nodes as-vm-1-nic",
				"delete-lbs kubernetes", "delete-lbs kubernetes-internal", "delete-lbs pool1",
				"upgrade-pips kubernetes-" + frontName(uidA), "upgrade-pips kubernetes-" + frontName(uidC),
				"hand-off default/a", "hand-off default/b", "hand-off default/c",
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.BasicLBs) != 3 {
					t.Errorf("basic LBs %v", p.BasicLBs)
				}
				// The NIC of as-vm-0 leaves both primary LBs' pools in one write.
				for _, s := range p.Of(PhaseDetachNodes) {
					if strings.Contains(s.Target, "as-vm-0") && len(s.Edit.Changes) != 2 {
						t.Errorf("as-vm-0 changes %+v", s.Edit.Changes)
					}
					for _, c := range s.Edit.Changes {
						if c.Add {
							t.Errorf("detach adds a pool: %+v", c)
						}
					}
				}
				b := p.Services[1]
				if !b.Internal || b.IPs[0].String() != "10.240.0.50" || b.BasicLB != lbID("kubernetes-internal") {
					t.Errorf("internal service plan %+v", b)
				}
				c := p.Services[2]
				if len(c.PublicIPIDs) != 1 || !strings.HasSuffix(c.PublicIPIDs[0], strings.ToLower(frontName(uidC))) {
					t.Errorf("public IPs of c %v", c.PublicIPIDs)
				}
			},
		},
		{
			name: "Standard cluster: nothing to do",
			input: func() Input {
				return Input{ClusterName: cl,
					LoadBalancers: []*armnetwork.LoadBalancer{
						lb("kubernetes", "Standard", []fe{{name: frontName(uidA), pip: "p-a"}}, nicCfg("vm")),
						lb("kubernetes-internal", "Standard", []fe{{name: frontName(uidB), ip: "10.240.0.50"}}),
					},
					PublicIPs: []*armnetwork.PublicIPAddress{pip("p-a", "Standard", "Static", "203.0.113.10", lbID("kubernetes")+"/frontendIPConfigurations/"+frontName(uidA))},
					Services:  []*v1.Service{svc("a", uidA, false, "203.0.113.10"), svc("b", uidB, true, "10.240.0.50")},
				}
			},
		},
		{
			name: "a Basic load balancer of another cluster or user is left alone",
			input: func() Input {
				return Input{ClusterName: cl, LoadBalancers: []*armnetwork.LoadBalancer{lb("user-lb", "Basic", nil, nicCfg("vm"))}}
			},
		},
		{
			name: "loadBalancerName prefix decides ownership",
			input: func() Input {
				return Input{ClusterName: cl, LBNamePrefix: "mylb", LoadBalancers: []*armnetwork.LoadBalancer{
					lb("mylb-internal", "Basic", nil), lb("kubernetes", "Basic", nil)}}
			},
			want: []string{"delete-lbs mylb-internal"},
		},
		{
			name: "resumed after the Basic load balancers were deleted: upgrade and hand-off are left",
			input: func() Input {
				in := basicCluster()
				in.LoadBalancers = nil
				in.ScaleSets = nil
				in.PublicIPs = []*armnetwork.PublicIPAddress{
					pip("kubernetes-"+frontName(uidA), "Basic", "Static", "203.0.113.10", ""),
					pip("kubernetes-"+frontName(uidC), "Standard", "Static", "203.0.113.11", ""),
				}
				return in
			},
			want: []string{"upgrade-pips kubernetes-" + frontName(uidA), "hand-off default/a", "hand-off default/b", "hand-off default/c"},
		},
		{
			name: "resumed after the upgrade: an internal address no frontend holds still triggers the hand-off",
			input: func() Input {
				in := basicCluster()
				in.LoadBalancers = []*armnetwork.LoadBalancer{lb("kubernetes", "Standard", []fe{
					{name: frontName(uidA), pip: "kubernetes-" + frontName(uidA)}, {name: frontName(uidC), pip: "kubernetes-" + frontName(uidC)}})}
				in.ScaleSets = nil
				in.PublicIPs = []*armnetwork.PublicIPAddress{
					pip("kubernetes-"+frontName(uidA), "Standard", "Static", "203.0.113.10", lbID("kubernetes")+"/frontendIPConfigurations/"+frontName(uidA)),
					pip("kubernetes-"+frontName(uidC), "Standard", "Static", "203.0.113.11", lbID("kubernetes")+"/frontendIPConfigurations/"+frontName(uidC)),
				}
				return in
			},
			want: []string{"hand-off default/b"},
		},
		{
			name: "finished migration: empty plan",
			input: func() Input {
				in := basicCluster()
				in.LoadBalancers = []*armnetwork.LoadBalancer{
					lb("kubernetes", "Standard", []fe{{name: frontName(uidA), pip: "kubernetes-" + frontName(uidA)}, {name: frontName(uidC), pip: "kubernetes-" + frontName(uidC)}}),
					lb("kubernetes-internal", "Standard", []fe{{name: frontName(uidB), ip: "10.240.0.50"}}),
				}
				in.ScaleSets = []*armcompute.VirtualMachineScaleSet{scaleSet("pool1", lbID("kubernetes")+"/backendAddressPools/"+cl)}
				in.PublicIPs = []*armnetwork.PublicIPAddress{
					pip("kubernetes-"+frontName(uidA), "Standard", "Static", "203.0.113.10", ""),
					pip("kubernetes-"+frontName(uidC), "Standard", "Static", "203.0.113.11", ""),
				}
				return in
			},
		},
		{
			name: "an internal service the user moved to another address is not pinned back",
			input: func() Input {
				return Input{ClusterName: cl,
					LoadBalancers: []*armnetwork.LoadBalancer{lb("kubernetes-internal", "Standard", []fe{{name: frontName(uidB), ip: "10.240.0.60"}})},
					Services:      []*v1.Service{svc("b", uidB, true, "10.240.0.50")}}
			},
		},
		{
			name: "a public IP of another name: upgraded, with a warning to name it in the annotation",
			input: func() Input {
				in := basicCluster()
				in.Services = in.Services[:1]
				in.LoadBalancers = []*armnetwork.LoadBalancer{lb("kubernetes", "Basic", []fe{{name: frontName(uidA), pip: "custom"}})}
				in.PublicIPs = []*armnetwork.PublicIPAddress{pip("custom", "Basic", "Static", "203.0.113.10", lbID("kubernetes")+"/frontendIPConfigurations/"+frontName(uidA))}
				return in
			},
			want: []string{"delete-lbs kubernetes", "upgrade-pips custom", "hand-off default/a"},
			check: func(t *testing.T, p *Plan) {
				if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], annotations.PIPName+"=custom") {
					t.Errorf("warnings %v", p.Warnings)
				}
				in := basicCluster()
				in.Services[0].Annotations[annotations.PIPName] = "custom"
				if w := pipNameWarning(cl, &ServicePlan{Svc: in.Services[0], PublicIPIDs: []string{strings.ToLower(pipID("custom"))}}, nil); w != "" {
					t.Errorf("warning despite the annotation: %s", w)
				}
			},
		},
		{
			name: "a Basic IP held by a NIC is not upgraded",
			input: func() Input {
				in := Input{ClusterName: cl,
					PublicIPs: []*armnetwork.PublicIPAddress{pip("vm-ip", "Basic", "Static", "203.0.113.10", nicCfg("vm"))},
					Services:  []*v1.Service{svc("a", uidA, false, "203.0.113.10")}}
				return in
			},
			check: func(t *testing.T, p *Plan) {
				if len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], "not upgraded") {
					t.Errorf("warnings %v", p.Warnings)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Build(c.input())
			if got := summary(p); !reflect.DeepEqual(got, c.want) && (len(got) > 0 || len(c.want) > 0) {
				t.Fatalf("steps\n got %q\nwant %q", got, c.want)
			}
			if p.Needed() != (len(c.want) > 0) {
				t.Errorf("Needed() = %v", p.Needed())
			}
			if c.check != nil {
				c.check(t, p)
			}
		})
	}
}

// TestBuildConverges replays a migration step by step on an in-memory model of Azure: after
// each phase, the re-planned remainder is exactly the plan's later phases (a crash anywhere
// resumes, never repeats a finished phase), and the end state plans nothing.
func TestBuildConverges(t *testing.T) {
	in := basicCluster()
	first := Build(in)
	for _, ph := range Phases() {
		for _, s := range first.Of(ph) {
			applyStep(&in, s)
		}
		rest := Build(in)
		var want []string
		for _, s := range first.Steps {
			if s.Phase > ph {
				want = append(want, summary(&Plan{Steps: []Step{s}})...)
			}
		}
		if got := summary(rest); !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
			t.Fatalf("after %s:\n got %q\nwant %q", ph, got, want)
		}
	}
}

// applyStep changes the in-memory Azure as the executor's step would.
func applyStep(in *Input, s Step) {
	switch s.Phase {
	case PhaseStaticPIPs, PhaseUpgradePIPs:
		for _, p := range in.PublicIPs {
			if strings.EqualFold(*p.ID, s.Target) {
				p.Properties.PublicIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
				if s.Phase == PhaseUpgradePIPs {
					p.SKU.Name = to.Ptr(armnetwork.PublicIPAddressSKUNameStandard)
				}
			}
		}
	case PhaseDetachModels:
		for _, ss := range in.ScaleSets {
			if *ss.ID == s.Target {
				ic := ss.Properties.VirtualMachineProfile.NetworkProfile.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0]
				ic.Properties.LoadBalancerBackendAddressPools = nil
			}
		}
	case PhaseDetachNodes:
		for _, lb := range in.LoadBalancers {
			for _, pool := range lb.Properties.BackendAddressPools {
				var keep []*armnetwork.InterfaceIPConfiguration
				for _, r := range pool.Properties.BackendIPConfigurations {
					if !strings.HasPrefix(strings.ToLower(*r.ID), strings.ToLower(s.Edit.Owner)+"/") {
						keep = append(keep, r)
					}
				}
				pool.Properties.BackendIPConfigurations = keep
			}
		}
	case PhaseDeleteLBs:
		var keep []*armnetwork.LoadBalancer
		for _, lb := range in.LoadBalancers {
			if *lb.ID != s.Target {
				keep = append(keep, lb)
			}
		}
		in.LoadBalancers = keep
		for _, p := range in.PublicIPs {
			if p.Properties.IPConfiguration != nil && strings.HasPrefix(*p.Properties.IPConfiguration.ID, s.Target+"/") {
				p.Properties.IPConfiguration = nil
			}
		}
	case PhaseHandOff:
		sp := s.Service
		name := naming.LoadBalancerName(cl, sp.Internal)
		var std *armnetwork.LoadBalancer
		for _, lb := range in.LoadBalancers {
			if *lb.Name == name {
				std = lb
			}
		}
		if std == nil {
			std = lb(name, "Standard", nil)
			in.LoadBalancers = append(in.LoadBalancers, std)
		}
		f := fe{name: naming.ServiceLBName(sp.Svc.UID)}
		if sp.Internal {
			f.ip = sp.IPs[0].String()
		} else {
			f.pip = azureid.Name(sp.PublicIPIDs[0])
		}
		added := lb("x", "Standard", []fe{f}).Properties.FrontendIPConfigurations[0]
		std.Properties.FrontendIPConfigurations = append(std.Properties.FrontendIPConfigurations, added)
	default:
		panic(fmt.Sprint("unknown phase ", s.Phase))
	}
}

func TestParsePhase(t *testing.T) {
	for _, p := range Phases() {
		if got, ok := ParsePhase(p.String()); !ok || got != p {
			t.Errorf("%s: %v %v", p, got, ok)
		}
	}
	if _, ok := ParsePhase("nope"); ok {
		t.Error("parsed an unknown phase")
	}
}
