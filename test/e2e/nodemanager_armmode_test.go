package e2e

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestNodeManagerARMModeEachVMKind: in ARM mode the node manager initialises the node of a
// Uniform scale-set instance, a Flexible scale-set instance, an availability-set VM and a VM in
// another resource group, each from ARM alone (one `--once` pass each). Its requests carry its
// own User-Agent, so the suite's role check holds them against
// deploy/azure/azure-cloud-node-manager-role.json.
func TestNodeManagerARMModeEachVMKind(t *testing.T) {
	working(t)
	nodeManager := nodesRequireBinary(t, "azure-cloud-node-manager")
	e := framework.Start(t, framework.Options{Topology: nodesTopology(1), CloudConfig: nodesCloudConfig})
	uniform, flex, avset, other := nodesByKind(e.Machines)
	if len(uniform) == 0 || len(flex) == 0 || len(avset) == 0 || other.NodeName == "" {
		t.Fatalf("topology lacks a kind: %d uniform, %d flex, %d availability set, other %q", len(uniform), len(flex), len(avset), other.NodeName)
	}
	for _, m := range []framework.Machine{uniform[0], flex[0], avset[0], other} {
		var labels map[string]string
		if m.ResourceGroup != e.Azure.ResourceGroup {
			labels = map[string]string{nodes.LabelResourceGroup: m.ResourceGroup}
		}
		nodesCreate(t, e, m, "", labels)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, nodeManager, "--kubeconfig="+e.Kubeconfig, "--node-name="+m.NodeName,
			"--use-instance-metadata=false", "--cloud-config="+e.CloudConfigPath, "--once", "--v=2")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+e.Azure.CAFile)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("node manager for %s: %v\n%s", m.NodeName, err, out)
		}
		e.WaitFor("node manager initialised "+m.NodeName+" from ARM", nodesInitialized(e, m), 30*time.Second)
	}
}
