package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

// lbTestCompatMetrics: after services were reconciled, /metrics carries the existing Azure
// provider's families, with its names and labels (request, resource_group, subscription_id,
// source; code on errors), so its dashboards and alerts keep working: ARM request latency per
// request name, an injected ARM 500 counted with its code, and the service operations with the
// service as source.
func lbTestCompatMetrics(l *lbEnv) {
	t := l.t
	ctx := context.Background()
	// One 500 on a load balancer write: the SDK retries it, the service still converges.
	if _, err := l.Azsim.AddFault(ctx, middleware.Fault{Kind: middleware.FaultError, Status: 500, Code: "InternalServerError",
		Message: "compat metrics", Class: middleware.Write, ResourceType: "loadBalancers", Count: 1}); err != nil {
		t.Fatal(err)
	}
	s := l.create(lbService("compat-metrics", nil, lbTCP(8080)))
	s = l.waitIP(s.Name)
	rg, sub := strings.ToLower(l.Azure.ResourceGroup), l.Azure.SubscriptionID
	want := []struct{ series, labels string }{
		{"cloudprovider_azure_api_request_duration_seconds_count",
			fmt.Sprintf(`request="load_balancers_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
		{"cloudprovider_azure_api_request_duration_seconds_count",
			fmt.Sprintf(`request="public_ip_addresses_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
		{"cloudprovider_azure_api_request_errors",
			fmt.Sprintf(`code="InternalServerError",request="load_balancers_create_or_update",resource_group="%s",source="",subscription_id="%s"`, rg, sub)},
		{"cloudprovider_azure_op_duration_seconds_count",
			fmt.Sprintf(`request="services_ensure_loadbalancer",resource_group="%s",source="default/compat-metrics",subscription_id="%s"`, rg, sub)},
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
	l.deleteAndWaitGone(s)
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
