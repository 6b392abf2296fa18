package provisioner

import (
	"errors"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const subsystem = "disk_provisioner"

// Metrics of the provisioner; NewMetrics makes unregistered ones (tests), Register adds them
// to the legacy registry served on /metrics.
type Metrics struct {
	operations       *metrics.CounterVec
	disksCreated     *metrics.CounterVec
	zoneChoiceErrors *metrics.CounterVec
}

// NewMetrics returns a fresh set.
func NewMetrics() *Metrics {
	return &Metrics{
		operations: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: subsystem, Name: "operations_total", StabilityLevel: metrics.ALPHA,
			Help: "Provision and delete operations by result (success, error, arm_<status>).",
		}, []string{"operation", "result"}),
		disksCreated: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: subsystem, Name: "disks_created_total", StabilityLevel: metrics.ALPHA,
			Help: "Managed disks created, by the zone rule that chose their zone.",
		}, []string{"rule"}),
		zoneChoiceErrors: metrics.NewCounterVec(&metrics.CounterOpts{
			Subsystem: subsystem, Name: "zone_choice_errors_total", StabilityLevel: metrics.ALPHA,
			Help: "Claims whose disk zone could not be chosen, by kind (invalid_class, node_not_zoned, no_zoned_nodes, other).",
		}, []string{"kind"}),
	}
}

// Register adds the metrics to the legacy registry.
func (m *Metrics) Register() {
	legacyregistry.MustRegister(m.operations, m.disksCreated, m.zoneChoiceErrors)
}

func (m *Metrics) observeProvision(err error) {
	m.operations.WithLabelValues("provision", result(err)).Inc()
}
func (m *Metrics) observeDelete(err error) { m.operations.WithLabelValues("delete", result(err)).Inc() }

func result(err error) string {
	if err == nil {
		return "success"
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return "arm_" + strconv.Itoa(re.StatusCode)
	}
	return "error"
}
