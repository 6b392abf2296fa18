package compute

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
	"github.com/azure-ccm/azure-ccm/internal/azsim/network"
)

// A scale set instance may not join pools that put more load-balancing rules
// on its NIC than NRP allows.
func TestInstanceRulesPerNICLimit(t *testing.T) {
	v := newEnv(t, arm.Config{})
	lbID := "/subscriptions/" + sub + "/resourceGroups/" + rg + "/providers/Microsoft.Network/loadBalancers/big"
	fe, pool, probe := lbID+"/frontendIPConfigurations/fe", lbID+"/backendAddressPools/pool", lbID+"/probes/p"
	lb := armnetwork.LoadBalancer{
		Location: to.Ptr(loc),
		SKU:      &armnetwork.LoadBalancerSKU{Name: to.Ptr(armnetwork.LoadBalancerSKUNameStandard)},
		Properties: &armnetwork.LoadBalancerPropertiesFormat{
			FrontendIPConfigurations: []*armnetwork.FrontendIPConfiguration{{Name: to.Ptr("fe"), Properties: &armnetwork.FrontendIPConfigurationPropertiesFormat{
				Subnet: &armnetwork.Subnet{ID: to.Ptr(v.subnet)},
			}}},
			BackendAddressPools: []*armnetwork.BackendAddressPool{{Name: to.Ptr("pool")}},
			Probes: []*armnetwork.Probe{{Name: to.Ptr("p"), Properties: &armnetwork.ProbePropertiesFormat{
				Protocol: to.Ptr(armnetwork.ProbeProtocolTCP), Port: to.Ptr[int32](80),
			}}},
		},
	}
	for i := 0; i <= network.MaxRulesPerNIC; i++ {
		lb.Properties.LoadBalancingRules = append(lb.Properties.LoadBalancingRules, &armnetwork.LoadBalancingRule{
			Name: to.Ptr(fmt.Sprintf("r%d", i)),
			Properties: &armnetwork.LoadBalancingRulePropertiesFormat{
				FrontendIPConfiguration: &armnetwork.SubResource{ID: to.Ptr(fe)},
				BackendAddressPool:      &armnetwork.SubResource{ID: to.Ptr(pool)},
				Probe:                   &armnetwork.SubResource{ID: to.Ptr(probe)},
				Protocol:                to.Ptr(armnetwork.TransportProtocolTCP),
				FrontendPort:            to.Ptr(int32(1000 + i)),
				BackendPort:             to.Ptr(int32(1000 + i)),
			},
		})
	}
	p, err := v.net.NewLoadBalancersClient().BeginCreateOrUpdate(v.ctx, rg, "big", lb, nil)
	v.must(err, "create lb")
	_, err = p.PollUntilDone(v.ctx, fastPoll)
	v.must(err, "create lb")

	v.putScaleSet("ss", v.scaleSet(1, nil, false), nil)
	vmc := v.comp.NewVirtualMachineScaleSetVMsClient()
	inst, err := vmc.Get(v.ctx, rg, "ss", "0", nil)
	v.must(err, "get instance")
	cfg := inst.Properties.NetworkProfileConfiguration
	cfg.NetworkInterfaceConfigurations[0].Properties.IPConfigurations[0].Properties.LoadBalancerBackendAddressPools = []*armcompute.SubResource{{ID: to.Ptr(pool)}}
	_, err = vmc.BeginUpdate(v.ctx, rg, "ss", "0", armcompute.VirtualMachineScaleSetVM{
		Location:   to.Ptr(loc),
		Properties: &armcompute.VirtualMachineScaleSetVMProperties{NetworkProfileConfiguration: cfg},
	}, nil)
	wantStatus(t, err, http.StatusBadRequest, "LoadBalancingRuleCountLimitReachedForNic")
	r, err := v.net.NewLoadBalancersClient().Get(v.ctx, rg, "big", nil)
	v.must(err, "get lb")
	for _, pl := range r.Properties.BackendAddressPools {
		if len(pl.Properties.BackendIPConfigurations) != 0 && strings.Contains(*pl.Properties.BackendIPConfigurations[0].ID, "/ss/") {
			t.Errorf("refused instance shows in the pool: %v", *pl.Properties.BackendIPConfigurations[0].ID)
		}
	}
}
