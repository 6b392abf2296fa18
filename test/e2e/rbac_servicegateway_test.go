package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/azure-ccm/azure-ccm/internal/servicegateway/admission"
	"github.com/azure-ccm/azure-ccm/test/framework"
	"github.com/azure-ccm/azure-ccm/test/framework/azurenames"
)

// rbacSGEgress is the egress identity of the test's egress pod (its NAT gateway's name).
const rbacSGEgress = "rbac-egress"

// TestRBACServiceGateway runs the CCM in service gateway mode (sgCloudConfig: container-based
// pools) with the chart's flags under a token of the chart's ServiceAccount only: an egress pod
// gets its NAT gateway and its address in the gateway (the controller's label-selected pod
// informer), a LoadBalancer service gets its IP and its pod's address, and the CCM log has no
// "forbidden". Any denial fails the test as soon as it shows in the log.
func TestRBACServiceGateway(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{CloudConfig: sgCloudConfig})
	f, err := lbARMClient(e.Azure)
	if err != nil {
		t.Fatal(err)
	}
	s := &sgEnv{Env: e, t: t, net: f, rg: e.Azure.ResourceGroup}
	rbacSGGateway(t, s)

	// The chart's RBAC in service gateway mode (pods list/watch only then).
	rbac := rbacRenderWith(t, []string{"ccm.serviceGateway=true"}, "ccm-rbac.yaml")
	if !strings.Contains(string(rbac), "resources: [pods]") {
		t.Fatal("the chart grants no pods list/watch with ccm.serviceGateway=true")
	}
	if strings.Contains(string(rbacRender(t, "ccm-rbac.yaml")), "resources: [pods]") {
		t.Fatal("the chart grants pods list/watch without service gateway mode")
	}
	rbacApply(t, e, rbac)
	saKubeconfig, _ := rbacCCMClient(t, e)

	for i, m := range e.Machines {
		nodesCreate(t, e, m, fmt.Sprintf("10.244.%d.0/24", i), nil)
	}
	// The chart's flags, the ServiceAccount's kubeconfig everywhere, and the controllers this
	// mode calls for (the node-based admin-state and local-pools switched off).
	args := append(rbacChartArgs(t),
		"--kubeconfig="+saKubeconfig,
		"--authentication-kubeconfig="+saKubeconfig,
		"--authorization-kubeconfig="+saKubeconfig,
		"--authorization-always-allow-paths=/healthz,/readyz,/livez",
		sgControllersFlag(t, e),
	)
	t.Logf("CCM flags: %v", args)
	e.StartCCM(args...)

	// An egress pod (the label the controller's pod informer selects) and a LoadBalancer
	// service with one pod of its own (Deployments: the default ServiceAccount a bare pod
	// needs may not exist yet).
	s.deployment("rbac-sg-egress", 1, map[string]string{admission.EgressLabel: rbacSGEgress})
	s.deployment("rbac-sg-web", 1, map[string]string{})
	web := s.service("rbac-sg-web", intstr.FromInt32(8080))

	wait := func(what string, cond framework.Condition) {
		t.Helper()
		e.WaitFor(what, rbacNotDenied(t, e, cond), lbWait)
	}
	wait("rbac-sg-web ingress IP", s.ServiceIngress("default", "rbac-sg-web"))
	wait("rbac-sg-web resources", s.resourcesOf(azurenames.GatewayIdentity(web.UID), false))
	wait("NAT gateway "+rbacSGEgress+" registered", func(ctx context.Context) (bool, error) {
		if _, err := s.net.NewNatGatewaysClient().Get(ctx, s.rg, rbacSGEgress, nil); err != nil {
			return false, err
		}
		svcs, err := s.gatewayServices(ctx)
		if err != nil {
			return false, err
		}
		return svcs[rbacSGEgress] == "Outbound", fmt.Errorf("gateway services %v", svcs)
	})
	wait("the egress and the web pod in the gateway", s.inStep(2))

	if lines := rbacCCMForbidden(t, e); len(lines) > 0 {
		t.Errorf("the CCM was denied by RBAC (%d lines), e.g.:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
	}
}

// rbacSGGateway creates the service gateway of the cluster's VNet in azsim (as sgStart).
func rbacSGGateway(t *testing.T, s *sgEnv) {
	t.Helper()
	a := s.Azure
	vnetID := fmt.Sprintf("/subscriptions/%s/resourceGroups/%s/providers/Microsoft.Network/virtualNetworks/%s",
		a.SubscriptionID, a.VnetResourceGroup, a.VnetName)
	ctx := lbCtx(t)
	p, err := s.net.NewServiceGatewaysClient().BeginCreateOrUpdate(ctx, s.rg, azurenames.ServiceGatewayName, armnetwork.ServiceGateway{
		Location:   to.Ptr(a.Location),
		SKU:        &armnetwork.ServiceGatewaySKU{Name: to.Ptr(armnetwork.ServiceGatewaySKUNameStandard), Tier: to.Ptr(armnetwork.ServiceGatewaySKUTierRegional)},
		Properties: &armnetwork.ServiceGatewayPropertiesFormat{VirtualNetwork: &armnetwork.VirtualNetwork{ID: to.Ptr(vnetID)}}}, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// rbacCCMForbidden returns the RBAC denials of the CCM log so far.
func rbacCCMForbidden(t *testing.T, e *framework.Env) []string {
	t.Helper()
	out, err := os.ReadFile(e.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	return rbacForbiddenLines(string(out))
}

// rbacNotDenied is cond, but fails the test at once when the CCM log shows an RBAC denial
// (a forbidden informer never syncs: the condition would only time out).
func rbacNotDenied(t *testing.T, e *framework.Env, cond framework.Condition) framework.Condition {
	return func(ctx context.Context) (bool, error) {
		if lines := rbacCCMForbidden(t, e); len(lines) > 0 {
			t.Fatalf("the CCM was denied by RBAC (%d lines), e.g.:\n%s", len(lines), strings.Join(lines[:min(5, len(lines))], "\n"))
		}
		return cond(ctx)
	}
}
