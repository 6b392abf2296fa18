package arm

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"k8s.io/component-base/metrics"
)

// The existing Azure provider's metric families (namespace cloudprovider_azure), kept under the
// same names and labels so its dashboards and alerts work unchanged.
const compatNamespace = "cloudprovider_azure"

// compatLabelNames are the existing provider's labels: the request (or operation) name, the
// resource group (lower case), the subscription and the source (the service or node an
// operation is for; empty for ARM requests).
func compatLabelNames() []string {
	return []string{"request", "resource_group", "subscription_id", "source"}
}

// compatMetrics are the existing provider's families.
type compatMetrics struct {
	APILatency     *metrics.HistogramVec
	APIErrors      *metrics.CounterVec
	APIRateLimited *metrics.CounterVec
	APIThrottled   *metrics.CounterVec
	OpLatency      *metrics.HistogramVec
	OpFailures     *metrics.CounterVec
}

func newCompatMetrics() compatMetrics {
	return compatMetrics{
		APILatency: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: compatNamespace, Name: "api_request_duration_seconds",
			Help:           "Latency of one ARM request (one attempt), by request, resource group and subscription.",
			Buckets:        []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
			StabilityLevel: metrics.ALPHA,
		}, compatLabelNames()),
		APIErrors: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: compatNamespace, Name: "api_request_errors",
			Help:           "ARM requests that failed (no response, or a status of 300 or more), by request and ARM error code.",
			StabilityLevel: metrics.ALPHA,
		}, append(compatLabelNames(), "code")),
		APIRateLimited: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: compatNamespace, Name: "api_request_ratelimited_count",
			Help:           "ARM requests held (or refused) by the client's own pacing before they were sent.",
			StabilityLevel: metrics.ALPHA,
		}, compatLabelNames()),
		APIThrottled: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: compatNamespace, Name: "api_request_throttled_count",
			Help:           "ARM requests held (or refused) before they were sent because ARM answered 429 and its Retry-After had not passed.",
			StabilityLevel: metrics.ALPHA,
		}, compatLabelNames()),
		OpLatency: metrics.NewHistogramVec(&metrics.HistogramOpts{
			Namespace: compatNamespace, Name: "op_duration_seconds",
			Help:           "Latency of a whole cloud provider operation (e.g. services_ensure_loadbalancer), successful or not.",
			Buckets:        []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200},
			StabilityLevel: metrics.ALPHA,
		}, compatLabelNames()),
		OpFailures: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: compatNamespace, Name: "op_failure_count",
			Help:           "Cloud provider operations that failed.",
			StabilityLevel: metrics.ALPHA,
		}, compatLabelNames()),
	}
}

func (c *compatMetrics) collectors() []metrics.Registerable {
	return []metrics.Registerable{c.APILatency, c.APIErrors, c.APIRateLimited, c.APIThrottled, c.OpLatency, c.OpFailures}
}

// ObserveOperation records one whole operation in the existing provider's operation families:
// its duration always, and a failure when err is not nil. request is the existing provider's
// name ("services_ensure_loadbalancer", "routes_create_route" ...); the resource group is
// lower-cased as it does.
func (m *Metrics) ObserveOperation(request, resourceGroup, subscription, source string, d time.Duration, err error) {
	if m == nil {
		return
	}
	lv := []string{request, strings.ToLower(resourceGroup), subscription, source}
	m.OpLatency.WithLabelValues(lv...).Observe(d.Seconds())
	if err != nil {
		m.OpFailures.WithLabelValues(lv...).Inc()
	}
}

// observeAPI records one ARM attempt: its latency, and an error with the ARM error code.
func (m *Metrics) observeAPI(req *http.Request, resp *http.Response, err error, d time.Duration) {
	lv := compatRequestLabels(req)
	m.APILatency.WithLabelValues(lv...).Observe(d.Seconds())
	if err == nil && resp != nil && resp.StatusCode < http.StatusMultipleChoices {
		return
	}
	m.APIErrors.WithLabelValues(append(lv, errorCodeOf(resp, err))...).Inc()
}

// observeHold counts a request the gate held or refused.
func (m *Metrics) observeHold(req *http.Request, why hold) {
	if m == nil {
		return
	}
	switch why {
	case holdThrottled:
		m.APIThrottled.WithLabelValues(compatRequestLabels(req)...).Inc()
	case holdRateLimited:
		m.APIRateLimited.WithLabelValues(compatRequestLabels(req)...).Inc()
	}
}

// errorCodeOf is the ARM error code of a failed response ("ResourceNotFound",
// "SubscriptionRequestsThrottled" ...), its HTTP status when the body names none, and "" when
// there was no response.
func errorCodeOf(resp *http.Response, err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return re.ErrorCode
	}
	if resp == nil {
		return ""
	}
	// NewResponseError reads the body through runtime.Payload, which keeps it for the caller.
	if errors.As(runtime.NewResponseError(resp), &re) && re.ErrorCode != "" {
		return re.ErrorCode
	}
	return strconv.Itoa(resp.StatusCode)
}

// compatRequestLabels are the label values of an ARM request: request "<resource>_<verb>",
// resource group, subscription and an empty source.
func compatRequestLabels(req *http.Request) []string {
	segs := splitPath(req.URL.Path)
	var sub, rg string
	for i := 0; i+1 < len(segs); i++ {
		switch strings.ToLower(segs[i]) {
		case "subscriptions":
			if sub == "" {
				sub = segs[i+1]
			}
		case "resourcegroups":
			if rg == "" {
				rg = segs[i+1]
			}
		}
	}
	return []string{compatRequestName(req.Method, segs), strings.ToLower(rg), sub, ""}
}

// compatRequestName names a request as the existing provider's clients do: the resource
// ("load_balancers", "vm", "vmss", "vmssvm" ...) and the verb (get, list, create_or_update,
// update, delete, or a POST's action).
func compatRequestName(method string, segs []string) string {
	rest := segs
	for i := len(segs) - 2; i >= 0; i-- {
		if strings.EqualFold(segs[i], "providers") {
			rest = segs[i+2:]
			break
		}
	}
	if len(rest) == len(segs) && len(rest) >= 2 && strings.EqualFold(rest[0], "subscriptions") {
		rest = rest[2:]
	}
	var types []string
	for i := 0; i < len(rest); i += 2 {
		types = append(types, rest[i])
	}
	collection := len(rest)%2 == 1
	var verb string
	switch strings.ToUpper(method) {
	case http.MethodGet, http.MethodHead:
		verb = "get"
		if collection {
			verb = "list"
		}
	case http.MethodPut:
		verb = "create_or_update"
	case http.MethodPatch:
		verb = "update"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = "post"
		// A POST names its action after the resource: .../virtualMachines/vm1/start.
		if collection && len(types) > 1 {
			verb, types = snake(types[len(types)-1]), types[:len(types)-1]
		}
	}
	return compatResource(types) + "_" + verb
}

// compatResource is the existing provider's name of a resource type path.
func compatResource(types []string) string {
	switch strings.ToLower(strings.Join(types, "/")) {
	case "virtualmachines":
		return "vm"
	case "virtualmachinescalesets":
		return "vmss"
	case "virtualmachinescalesets/virtualmachines":
		return "vmssvm"
	case "":
		return "subscriptions"
	}
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = snake(t)
	}
	return strings.Join(parts, "_")
}

// snake turns loadBalancers into load_balancers and publicIPAddresses into
// public_ip_addresses.
func snake(s string) string {
	rs := []rune(s)
	var b strings.Builder
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (!unicode.IsUpper(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
