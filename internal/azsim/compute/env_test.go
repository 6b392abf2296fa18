package compute

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

const (
	sub = "00000000-0000-0000-0000-0000000000c1"
	rg  = "rg-compute"
	loc = "eastus"
)

type fakeCred struct{}

func (fakeCred) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "test-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// env is an engine with the network and compute types behind a TLS test
// server, and real SDK clients pointed at it.
type env struct {
	t      *testing.T
	ctx    context.Context
	engine *arm.Engine
	comp   *armcompute.ClientFactory
	net    *armnetwork.ClientFactory
	res    *armresources.ClientFactory
	subnet string // ID of rg/vnet/default
}

// fastPoll polls quickly; the engine answers with retry-after-ms as well.
var fastPoll = &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}

func newEnv(t *testing.T, cfg arm.Config) *env {
	t.Helper()
	e := arm.NewEngine(cfg)
	network.Register(e)
	Register(e)
	srv := httptest.NewTLSServer(e)
	t.Cleanup(srv.Close)
	opts := &azarm.ClientOptions{ClientOptions: policy.ClientOptions{
		Cloud: cloud.Configuration{Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: srv.URL, Audience: "https://management.azure.com/"},
		}},
		Transport: srv.Client(),
		Retry:     policy.RetryOptions{MaxRetries: -1},
	}}
	v := &env{t: t, engine: e}
	var err error
	if v.comp, err = armcompute.NewClientFactory(sub, fakeCred{}, opts); err != nil {
		t.Fatal(err)
	}
	if v.net, err = armnetwork.NewClientFactory(sub, fakeCred{}, opts); err != nil {
		t.Fatal(err)
	}
	if v.res, err = armresources.NewClientFactory(sub, fakeCred{}, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	v.ctx = ctx
	if _, err := v.res.NewResourceGroupsClient().CreateOrUpdate(ctx, rg, armresources.ResourceGroup{Location: to.Ptr(loc)}, nil); err != nil {
		t.Fatalf("create rg: %v", err)
	}
	vnet := armnetwork.VirtualNetwork{
		Location: to.Ptr(loc),
		Properties: &armnetwork.VirtualNetworkPropertiesFormat{
			AddressSpace: &armnetwork.AddressSpace{AddressPrefixes: []*string{to.Ptr("10.0.0.0/16")}},
			Subnets: []*armnetwork.Subnet{{
				Name:       to.Ptr("default"),
				Properties: &armnetwork.SubnetPropertiesFormat{AddressPrefix: to.Ptr("10.0.0.0/24")},
			}},
		},
	}
	vp, err := v.net.NewVirtualNetworksClient().BeginCreateOrUpdate(ctx, rg, "vnet", vnet, nil)
	if err != nil {
		t.Fatalf("create vnet: %v", err)
	}
	vr, err := vp.PollUntilDone(ctx, fastPoll)
	if err != nil {
		t.Fatalf("create vnet: %v", err)
	}
	v.subnet = *vr.Properties.Subnets[0].ID
	return v
}

// must fails the test on err.
func (v *env) must(err error, what string) {
	v.t.Helper()
	if err != nil {
		v.t.Fatalf("%s: %v", what, err)
	}
}

// wantStatus asserts that err is an ARM error with the given status (and code, if set).
func wantStatus(t *testing.T, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("want HTTP %d %s, got %v", status, code, err)
	}
	if re.StatusCode != status || (code != "" && re.ErrorCode != code) {
		t.Fatalf("want HTTP %d %s, got %d %s: %v", status, code, re.StatusCode, re.ErrorCode, err)
	}
}

func (v *env) nic(name string, pools ...string) *armnetwork.Interface {
	v.t.Helper()
	ipc := &armnetwork.InterfaceIPConfiguration{
		Name: to.Ptr("ipconfig1"),
		Properties: &armnetwork.InterfaceIPConfigurationPropertiesFormat{
			Subnet: &armnetwork.Subnet{ID: to.Ptr(v.subnet)},
		},
	}
	for _, p := range pools {
		ipc.Properties.LoadBalancerBackendAddressPools = append(ipc.Properties.LoadBalancerBackendAddressPools, &armnetwork.BackendAddressPool{ID: to.Ptr(p)})
	}
	p, err := v.net.NewInterfacesClient().BeginCreateOrUpdate(v.ctx, rg, name, armnetwork.Interface{
		Location:   to.Ptr(loc),
		Properties: &armnetwork.InterfacePropertiesFormat{IPConfigurations: []*armnetwork.InterfaceIPConfiguration{ipc}},
	}, nil)
	v.must(err, "create nic")
	r, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create nic")
	return &r.Interface
}

// lb creates a Standard load balancer with one backend pool and returns the pool ID.
func (v *env) lb(name string) string {
	v.t.Helper()
	p, err := v.net.NewLoadBalancersClient().BeginCreateOrUpdate(v.ctx, rg, name, armnetwork.LoadBalancer{
		Location: to.Ptr(loc),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr(name)}},
		},
	}, nil)
	v.must(err, "create lb")
	r, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create lb")
	return *r.Properties.BackendAddressPools[0].ID
}

func (v *env) poolMembers(lb string) []string {
	v.t.Helper()
	r, err := v.net.NewLoadBalancersClient().Get(v.ctx, rg, lb, nil)
	v.must(err, "get lb")
	var out []string
	for _, ipc := range r.Properties.BackendAddressPools[0].Properties.BackendIPConfigurations {
		out = append(out, *ipc.ID)
	}
	return out
}

// scaleSet returns a scale set model with one NIC configuration on the test subnet.
func (v *env) scaleSet(capacity int64, zones []string, flexible bool, pools ...string) armcompute.VirtualMachineScaleSet {
	ipc := &armcompute.VirtualMachineScaleSetIPConfiguration{
		Name: to.Ptr("ipconfig1"),
		Properties: &armcompute.VirtualMachineScaleSetIPConfigurationProperties{
			Primary: to.Ptr(true),
			Subnet:  &armcompute.APIEntityReference{ID: to.Ptr(v.subnet)},
		},
	}
	for _, p := range pools {
		ipc.Properties.LoadBalancerBackendAddressPools = append(ipc.Properties.LoadBalancerBackendAddressPools, &armcompute.SubResource{ID: to.Ptr(p)})
	}
	ss := armcompute.VirtualMachineScaleSet{
		Location: to.Ptr(loc),
		SKU:      &armcompute.SKU{Name: to.Ptr("Standard_D2s_v3"), Tier: to.Ptr("Standard"), Capacity: to.Ptr(capacity)},
		Properties: &armcompute.VirtualMachineScaleSetProperties{
			UpgradePolicy: &armcompute.UpgradePolicy{Mode: to.Ptr(armcompute.UpgradeModeManual)},
			VirtualMachineProfile: &armcompute.VirtualMachineScaleSetVMProfile{
				OSProfile: &armcompute.VirtualMachineScaleSetOSProfile{ComputerNamePrefix: to.Ptr("aks-pool-vmss"), AdminUsername: to.Ptr("azureuser")},
				NetworkProfile: &armcompute.VirtualMachineScaleSetNetworkProfile{
					NetworkInterfaceConfigurations: []*armcompute.VirtualMachineScaleSetNetworkConfiguration{{
						Name: to.Ptr("nic"),
						Properties: &armcompute.VirtualMachineScaleSetNetworkConfigurationProperties{
							Primary:          to.Ptr(true),
							IPConfigurations: []*armcompute.VirtualMachineScaleSetIPConfiguration{ipc},
						},
					}},
				},
			},
		},
	}
	for _, z := range zones {
		ss.Zones = append(ss.Zones, to.Ptr(z))
	}
	if flexible {
		ss.Properties.OrchestrationMode = to.Ptr(armcompute.OrchestrationModeFlexible)
		ss.Properties.UpgradePolicy = nil
	}
	return ss
}

func (v *env) putScaleSet(name string, ss armcompute.VirtualMachineScaleSet, opts *armcompute.VirtualMachineScaleSetsClientBeginCreateOrUpdateOptions) armcompute.VirtualMachineScaleSet {
	v.t.Helper()
	p, err := v.comp.NewVirtualMachineScaleSetsClient().BeginCreateOrUpdate(v.ctx, rg, name, ss, opts)
	v.must(err, "put vmss")
	r, err := p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "put vmss")
	return r.VirtualMachineScaleSet
}

// instances lists a scale set's instances through the SDK pager.
func (v *env) instances(ss string, expand bool) (vms []*armcompute.VirtualMachineScaleSetVM, pages int) {
	v.t.Helper()
	var opts *armcompute.VirtualMachineScaleSetVMsClientListOptions
	if expand {
		opts = &armcompute.VirtualMachineScaleSetVMsClientListOptions{Expand: to.Ptr("instanceView")}
	}
	pager := v.comp.NewVirtualMachineScaleSetVMsClient().NewListPager(rg, ss, opts)
	for pager.More() {
		page, err := pager.NextPage(v.ctx)
		v.must(err, "list vmss vms")
		pages++
		vms = append(vms, page.Value...)
	}
	return vms, pages
}

func powerState(statuses []*armcompute.InstanceViewStatus) string {
	for _, s := range statuses {
		if s.Code != nil && len(*s.Code) > 11 && (*s.Code)[:11] == "PowerState/" {
			return (*s.Code)[11:]
		}
	}
	return ""
}

var _ = http.StatusOK
