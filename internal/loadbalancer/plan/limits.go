package plan

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
)

// RuleLimitError refuses a write that would take a load balancer past
// maximumLoadBalancerRuleCount, before Azure answers with its own limit error.
type RuleLimitError struct {
	LoadBalancer string
	Rules        int
	Max          int
}

func (e *RuleLimitError) Error() string {
	return fmt.Sprintf("load balancer %s would have %d load balancing rules, more than maximumLoadBalancerRuleCount %d",
		e.LoadBalancer, e.Rules, e.Max)
}

// CheckRuleLimit refuses a load balancer going from before to after rules when after exceeds
// max (0: no limit) and grew: a load balancer already over the limit (the limit was lowered) may
// still shrink or stay, so its services keep reconciling.
func CheckRuleLimit(lbName string, before, after, max int) error {
	if max > 0 && after > max && after > before {
		return &RuleLimitError{LoadBalancer: lbName, Rules: after, Max: max}
	}
	return nil
}

// Rules counts the load balancing rules of lb (nil: none).
func Rules(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.LoadBalancingRules)
}
