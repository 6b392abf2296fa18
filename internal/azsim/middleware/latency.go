package middleware

import (
	"strings"
	"time"
)

// LatencyRule delays matching requests. Empty selectors match anything.
type LatencyRule struct {
	Class        Class    `json:"class,omitempty"`
	ResourceType string   `json:"resourceType,omitempty"`
	Method       string   `json:"method,omitempty"`
	Delay        Duration `json:"delay"`
}

// LatencyModel is an ordered rule list; the first matching rule gives the delay. The default
// model is empty: no added latency.
type LatencyModel struct {
	Rules []LatencyRule `json:"rules"`
}

func (r LatencyRule) matches(op Op) bool {
	return (r.Class == "" || r.Class == op.Class) &&
		(r.Method == "" || strings.EqualFold(r.Method, op.Method)) &&
		typeMatches(r.ResourceType, op.ResourceType)
}

// DelayFor returns the modelled latency of op.
func (m LatencyModel) DelayFor(op Op) time.Duration {
	for _, r := range m.Rules {
		if r.matches(op) {
			return time.Duration(r.Delay)
		}
	}
	return 0
}

// RealisticLatency is an example model close to observed ARM latencies for the CCM's writes.
func RealisticLatency() LatencyModel {
	return LatencyModel{Rules: []LatencyRule{
		{Class: Write, ResourceType: "Microsoft.Network/loadBalancers", Delay: Duration(time.Second)},
		{Class: Write, ResourceType: "Microsoft.Network/publicIPAddresses", Delay: Duration(500 * time.Millisecond)},
		{Class: Write, Delay: Duration(300 * time.Millisecond)},
		{Class: Delete, Delay: Duration(300 * time.Millisecond)},
		{Class: Read, Delay: Duration(50 * time.Millisecond)},
	}}
}
