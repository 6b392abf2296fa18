package provider

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// ReasonInstanceNotFoundGrace is the event a node without a VM gets while the grace period
// keeps it.
const ReasonInstanceNotFoundGrace = "InstanceNotFoundWithinGracePeriod"

// reportNotFoundGrace records, once per Node, that it is kept although ARM shows no VM for it.
func (c *Cloud) reportNotFoundGrace(node *v1.Node, age, grace time.Duration) {
	if c.recorder == nil {
		return
	}
	if _, seen := c.graceReported.LoadOrStore(node.UID, true); seen {
		return
	}
	c.recorder.Eventf(node, v1.EventTypeWarning, ReasonInstanceNotFoundGrace,
		"ARM shows no VM for the node yet; it is not deleted before it is %s old (nodeInstanceNotFoundGracePeriodInSeconds), now %s",
		grace, age.Round(time.Second))
}
