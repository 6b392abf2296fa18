package provider

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/component-base/metrics/testutil"
)

// scriptedLB answers every service operation with the error of its service's name.
type scriptedLB struct {
	cloudprovider.LoadBalancer
	errs map[string]error
}

func (l scriptedLB) EnsureLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	return &v1.LoadBalancerStatus{}, l.errs[svc.Name]
}

func (l scriptedLB) UpdateLoadBalancer(_ context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	return l.errs[svc.Name]
}

func (l scriptedLB) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	return l.errs[svc.Name]
}

func TestOperationMetrics(t *testing.T) {
	e := startSim(t, testTopology(1), "")
	e.cloud.lbBuilder = func(LoadBalancerDeps) (cloudprovider.LoadBalancer, error) {
		return scriptedLB{errs: map[string]error{"bad": errors.New("failed"), "other": cloudprovider.ImplementedElsewhere}}, nil
	}
	lb, ok := e.cloud.LoadBalancer()
	if !ok {
		t.Fatal("no load balancer")
	}
	ctx := context.Background()
	svc := func(name string) *v1.Service {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	_, _ = lb.EnsureLoadBalancer(ctx, "kubernetes", svc("good"), nil)
	_, _ = lb.EnsureLoadBalancer(ctx, "kubernetes", svc("bad"), nil)
	_, _ = lb.EnsureLoadBalancer(ctx, "kubernetes", svc("other"), nil)
	_ = lb.UpdateLoadBalancer(ctx, "kubernetes", svc("good"), nil)
	_ = lb.EnsureLoadBalancerDeleted(ctx, "kubernetes", svc("bad"))

	rp, ok := e.cloud.Routes()
	if !ok {
		t.Fatal("routes not enabled")
	}
	m := e.res.Machines[0]
	if err := rp.CreateRoute(ctx, "kubernetes", "", &cloudprovider.Route{TargetNode: types.NodeName(m.NodeName), DestinationCIDR: "10.244.0.0/24",
		TargetNodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: m.InternalIPs[0]}}}); err != nil {
		t.Fatal(err)
	}
	if err := rp.DeleteRoute(ctx, "kubernetes", &cloudprovider.Route{TargetNode: types.NodeName(m.NodeName), DestinationCIDR: "10.244.0.0/24"}); err != nil {
		t.Fatal(err)
	}

	om := e.cloud.Clients.Metrics
	sub := e.res.SubscriptionID
	for _, tc := range []struct {
		request, source string
		count           uint64
		failures        float64
	}{
		{opEnsureLoadBalancer, "ns/good", 1, 0},
		{opEnsureLoadBalancer, "ns/bad", 1, 1},
		{opEnsureLoadBalancer, "ns/other", 0, 0}, // served elsewhere: not this provider's operation
		{opUpdateLoadBalancer, "ns/good", 1, 0},
		{opEnsureLoadBalancerDeleted, "ns/bad", 1, 1},
		{opCreateRoute, m.NodeName, 1, 0},
		{opDeleteRoute, m.NodeName, 1, 0},
	} {
		lv := []string{tc.request, "rg", sub, tc.source}
		n, err := testutil.GetHistogramMetricCount(om.OpLatency.WithLabelValues(lv...))
		if err != nil {
			t.Fatal(err)
		}
		f, err := testutil.GetCounterMetricValue(om.OpFailures.WithLabelValues(lv...))
		if err != nil {
			t.Fatal(err)
		}
		if n != tc.count || f != tc.failures {
			t.Errorf("%v: op_duration_seconds count %d, op_failure_count %v; want %d and %v", lv, n, f, tc.count, tc.failures)
		}
	}
}
