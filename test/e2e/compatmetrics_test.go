package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

// lbTestCompatMetrics: after a burst of services was reconciled, /metrics carries the existing
// Azure provider's families, with its names and labels (request, resource_group,
// subscription_id, source; code on errors), so its dashboards and alerts keep working: ARM
// request latency per request name, an injected ARM 500 counted with its code, and the service
// operations with each service of the burst as source.
func lbTestCompatMetrics(l *lbEnv) {
	t := l.t
	ctx := context.Background()
	// One 500 on a load balancer write: the SDK retries it, the service still converges.
	if _, err := l.Azsim.AddFault(ctx, middleware.Fault{Kind: middleware.FaultError, Status: 500, Code: "InternalServerError",
		Message: "compat metrics", Class: middleware.Write, ResourceType: "loadBalancers", Count: 1}); err != nil {
		t.Fatal(err)
	}
	const burst = 10
	var svcs []*corev1.Service
	for i := range burst {
		svcs = append(svcs, l.create(lbService(fmt.Sprintf("compat-metrics-%d", i), nil, lbTCP(int32(8080+i)))))
	}
	for i, s := range svcs {
		svcs[i] = l.waitIP(s.Name)
	}
	rg, sub := strings.ToLower(l.Azure.ResourceGroup), l.Azure.SubscriptionID
	want := []struct{ series, labels string }{
		{"cloudprovider_azure_api_request_duration_seconds_count",
			fmt.Sprintf(`request="load_balancers_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
		{"cloudprovider_azure_api_request_duration_seconds_count",
			fmt.Sprintf(`request="public_ip_addresses_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
		{"cloudprovider_azure_api_request_errors",
			fmt.Sprintf(`code="InternalServerError",request="load_balancers_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
	}
	for _, s := range svcs {
		want = append(want, struct{ series, labels string }{"cloudprovider_azure_op_duration_seconds_count",
			fmt.Sprintf(`request="services_ensure_loadbalancer",resource_group="%s",source="default/%s",subscription_id="%s"`, rg, s.Name, sub)})
	}
	l.waitFor("the existing provider's metric families", func(ctx context.Context) (bool, error) {
		body, err := l.CCMMetrics(ctx)
		if err != nil {
			return false, err
		}
		for _, w := range want {
			series := w.series + "{" + w.labels + "}"
			m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
			if m == nil {
				return false, fmt.Errorf("no sample %s; the family's samples: %v", series, lbSamplesOf(body, w.series))
			}
			if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < 1 {
				return false, fmt.Errorf("%s = %s", series, m[1])
			}
		}
		return true, nil
	}, lbWait)
	for _, s := range svcs {
		l.deleteAndWaitGone(s)
	}
}

// lbSamplesOf lists a family's sample lines (for a failure message).
func lbSamplesOf(body, family string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, family+"{") {
			out = append(out, line)
		}
	}
	return out
}
