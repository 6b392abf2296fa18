package provider

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

// Nodes the CCM cannot map to an Azure VM. A providerID that is not an Azure VM's is treated as
// a node outside Azure (the existing provider's rule): kept as is, exists, never shut down. A
// malformed resource group label is an error naming it. None of them costs an ARM call.
func TestMalformedNodesCostNoARMCalls(t *testing.T) {
	e := startSim(t, testTopology(1), "")
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	const sub = "00000000-0000-0000-0000-000000000001"
	for _, tc := range []struct {
		name       string
		providerID string
		labels     map[string]string
		wantErr    string // in the metadata error; "" = treated as a node outside Azure
	}{
		{"other cloud's providerID", "aws:///us-east-1a/i-0123", nil, ""},
		{"azure prefix, not a resource ID", "azure://not-a-resource-id", nil, ""},
		{"resource ID of another type", "azure:///subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/nic0", nil, ""},
		{"scale set VM without instance ID", "azure:///subscriptions/" + sub + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/pool0/virtualMachines/", nil, ""},
		{"resource group label not a resource group name", "", map[string]string{nodes.LabelResourceGroup: "rg/with/slashes"}, "rg/with/slashes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bad-node", Labels: tc.labels}, Spec: v1.NodeSpec{ProviderID: tc.providerID}}
			before := e.armCalls("", "")
			md, err := inst.InstanceMetadata(ctx, n)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("InstanceMetadata error %v, want one naming %q", err, tc.wantErr)
				}
			} else {
				if err != nil || md.ProviderID != tc.providerID || md.Zone != "" || len(md.NodeAddresses) != 0 {
					t.Errorf("InstanceMetadata = %+v, %v; want the providerID kept and nothing else", md, err)
				}
				if ok, err := inst.InstanceExists(ctx, n); !ok || err != nil {
					t.Errorf("InstanceExists = %v, %v", ok, err)
				}
				if down, err := inst.InstanceShutdown(ctx, n); down || err != nil {
					t.Errorf("InstanceShutdown = %v, %v", down, err)
				}
			}
			if after := e.armCalls("", ""); after != before {
				t.Errorf("%d ARM calls for a malformed node:\n%s", after-before, e.statsString())
			}
		})
	}
}
