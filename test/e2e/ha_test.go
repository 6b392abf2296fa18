package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

const haAcquired = "successfully acquired lease"

// haHasAcquired: client-go logs the acquisition (structured, capitalised in v0.37).
func haHasAcquired(r *framework.CCMReplica) bool {
	return strings.Contains(strings.ToLower(r.Log()), haAcquired)
}

// TestLeaderElection runs two CCM replicas with leader election on a Lease: exactly one of them
// acts; when it crashes (SIGKILL, so the Lease is not released) the other takes over within
// the lease duration and initialises new nodes.
func TestLeaderElection(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	e := framework.Start(t, framework.Options{})
	if len(e.Machines) < 2 {
		t.Fatalf("default topology has %d machines", len(e.Machines))
	}
	ctx := context.Background()
	if _, err := framework.CreateNodes(ctx, e.Kube, framework.NodeOptions{ProviderID: true}, e.Machines[0]); err != nil {
		t.Fatal(err)
	}
	const leaseDuration = 6 * time.Second
	flags := []string{"--leader-elect=true", "--leader-elect-lease-duration=" + leaseDuration.String(),
		"--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s", "--controllers=cloud-node,cloud-node-lifecycle"}
	a := e.StartCCMReplica("a", flags...)
	b := e.StartCCMReplica("b", flags...)

	var leader, standby *framework.CCMReplica
	e.WaitFor("one replica holds the lease", func(ctx context.Context) (bool, error) {
		l, err := e.Kube.CoordinationV1().Leases("kube-system").Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, fmt.Errorf("lease has no holder")
		}
		aHas, bHas := haHasAcquired(a), haHasAcquired(b)
		switch {
		case aHas && bHas:
			return false, fmt.Errorf("both replicas acquired the lease")
		case aHas:
			leader, standby = a, b
		case bHas:
			leader, standby = b, a
		default:
			return false, fmt.Errorf("no replica logged %q yet", haAcquired)
		}
		return true, nil
	}, time.Minute)
	e.WaitFor("leader initialised "+e.Machines[0].NodeName, e.NodeInitialized(e.Machines[0].NodeName), time.Minute)
	if haHasAcquired(standby) {
		t.Fatalf("standby %s acquired the lease while the leader ran", standby.Name)
	}

	// The leader crashes without releasing the lease.
	crashed := time.Now()
	if err := syscall.Kill(-leader.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Done()
	e.WaitFor("standby "+standby.Name+" takes over", func(ctx context.Context) (bool, error) {
		if !haHasAcquired(standby) {
			return false, fmt.Errorf("standby has not acquired the lease")
		}
		return true, nil
	}, 3*leaseDuration+30*time.Second)
	takeover := time.Since(crashed)
	if _, err := framework.CreateNodes(ctx, e.Kube, framework.NodeOptions{ProviderID: true}, e.Machines[1]); err != nil {
		t.Fatal(err)
	}
	e.WaitFor("new leader initialised "+e.Machines[1].NodeName, e.NodeInitialized(e.Machines[1].NodeName), time.Minute)
	t.Logf("takeover after a leader crash: %s (lease duration %s)", takeover.Round(100*time.Millisecond), leaseDuration)
}
