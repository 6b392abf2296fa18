package provider

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

func TestWithinNotFoundGrace(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		created time.Time
		grace   time.Duration
		want    bool
	}{
		{"no grace period", now.Add(-time.Second), 0, false},
		{"young node", now.Add(-10 * time.Second), time.Minute, true},
		{"just created", now, time.Minute, true},
		{"grace period over", now.Add(-time.Minute), time.Minute, false},
		{"old node", now.Add(-time.Hour), time.Minute, false},
		{"unknown creation time", time.Time{}, time.Minute, false},
	} {
		if _, got := withinNotFoundGrace(tc.created, now, tc.grace); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A node whose VM ARM does not list is kept while it is younger than the grace period (with
// one event), then reported gone; without a grace period it is gone at once.
func TestInstanceExistsHonoursNotFoundGrace(t *testing.T) {
	e := startSim(t, testTopology(1), `,"vmCacheTTLInSeconds":1,"vmssVirtualMachinesCacheTTLInSeconds":1,"nodeInstanceNotFoundGracePeriodInSeconds":60`)
	rec := record.NewFakeRecorder(10)
	e.cloud.recorder = rec
	inst, _ := e.cloud.InstancesV2()
	ctx := context.Background()
	ghost := func(age time.Duration) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "not-in-arm", UID: "u1", CreationTimestamp: metav1.NewTime(time.Now().Add(-age))},
			Spec: v1.NodeSpec{ProviderID: "azure:///subscriptions/" + e.res.SubscriptionID +
				"/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/not-in-arm"}}
	}
	for i := 0; i < 3; i++ {
		ok, err := inst.InstanceExists(ctx, ghost(10*time.Second))
		if err != nil || !ok {
			t.Fatalf("young node without VM: exists=%v err=%v, want kept", ok, err)
		}
		if down, err := inst.InstanceShutdown(ctx, ghost(10*time.Second)); err != nil || down {
			t.Fatalf("young node without VM: shutdown=%v err=%v", down, err)
		}
	}
	if len(rec.Events) != 1 {
		t.Fatalf("%d events, want one InstanceNotFoundWithinGracePeriod", len(rec.Events))
	}
	if ok, err := inst.InstanceExists(ctx, ghost(2*time.Minute)); err != nil || ok {
		t.Fatalf("node past the grace period: exists=%v err=%v, want gone", ok, err)
	}
	e.cloud.Config.NodeInstanceNotFoundGracePeriodInSeconds = 0
	if ok, err := inst.InstanceExists(ctx, ghost(time.Second)); err != nil || ok {
		t.Fatalf("no grace period: exists=%v err=%v, want gone", ok, err)
	}
}
