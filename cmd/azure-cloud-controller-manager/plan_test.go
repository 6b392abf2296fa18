package main

import (
	"strings"
	"testing"

	"k8s.io/cloud-provider/app"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
)

// TestPlanTakesTheDeploymentFlags: the plan command accepts the CCM's own arguments as a
// Deployment passes them, plus its own.
func TestPlanTakesTheDeploymentFlags(t *testing.T) {
	w := &wiring{}
	inits, err := controllers.Initializers(w.controllers())
	if err != nil {
		t.Fatal(err)
	}
	cmd := planCommand(w, app.ControllerNames(inits))
	args := []string{"--cloud-provider=azure", "--cloud-config=/etc/kubernetes/azure.json", "--kubeconfig=/k", "--leader-elect=true",
		"--controllers=*,-cloud-node,-drift-audit", "--configure-cloud-routes=false", "--secure-port=10268", "--v=2",
		"--concurrent-service-syncs=10", "--drift-audit-period=30s", "--cluster-name=prod", "--output=json", "--timeout=1m",
		"--node-filter-requirements=env=prod"}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatalf("plan %s: %v", strings.Join(args, " "), err)
	}
	if err := cmd.ParseFlags([]string{"--no-such-flag"}); err == nil {
		t.Error("an unknown flag was accepted")
	}
}

func TestClusterCIDRs(t *testing.T) {
	got, err := clusterCIDRs("10.244.0.0/16, fd00::1/56")
	if err != nil || len(got) != 2 || got[0].String() != "10.244.0.0/16" || got[1].String() != "fd00::/56" {
		t.Errorf("clusterCIDRs = %v, %v", got, err)
	}
	for _, bad := range []string{"", "10.244.0.0", "x/16"} {
		if _, err := clusterCIDRs(bad); err == nil {
			t.Errorf("clusterCIDRs(%q) accepted", bad)
		}
	}
}
