package adminstate

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

func testutilValue(c *metrics.CounterVec, labels ...string) float64 {
	v, err := testutil.GetCounterMetricValue(c.WithLabelValues(labels...))
	if err != nil {
		return -1
	}
	return v
}
