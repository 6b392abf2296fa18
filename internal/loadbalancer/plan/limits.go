package plan

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
)

// MaxRules is Azure's limit of load-balancing rules on one Standard load balancer, the only rule
// limit the CCM applies. azure.json maximumLoadBalancerRuleCount is the existing provider's limit
// for choosing among Basic load balancers, which are not served here; on Standard it limits
// nothing there either.
const MaxRules = 1500

// RuleLimitError refuses a change that would take a load balancer past Azure's limit of rules,
// before Azure refuses the write.
type RuleLimitError struct {
	LoadBalancer string
	Rules        int
	Max          int
}

func (e *RuleLimitError) Error() string {
	return fmt.Sprintf("load balancer %s would have %d load balancing rules, more than Azure's limit of %d per Standard load balancer",
		e.LoadBalancer, e.Rules, e.Max)
}

// CheckRuleLimit refuses a load balancer going from before to after rules when after exceeds
// limit and grew: a load balancer already over the limit may still shrink or stay, so its
// services keep reconciling.
func CheckRuleLimit(lbName string, before, after, limit int) error {
	if after > limit && after > before {
		return &RuleLimitError{LoadBalancer: lbName, Rules: after, Max: limit}
	}
	return nil
}

// CheckRoom is the check made before anything of a service is written (its public IP above
// all): the rules of lb that are not the service's, the rules reserved for other services whose
// write is under way (pending) and the need rules of the service must stay within limit. A
// service that does not grow is never refused. grow is how many rules the service adds to lb.
func CheckRoom(lbName string, lb *armnetwork.LoadBalancer, svcLBName string, pending, need, limit int) (grow int, err error) {
	own := ServiceRules(lb, svcLBName)
	if need <= own {
		return 0, nil
	}
	if total := Rules(lb) - own + pending + need; total > limit {
		return 0, &RuleLimitError{LoadBalancer: lbName, Rules: total, Max: limit}
	}
	return need - own, nil
}

// Rules counts the load balancing rules of lb (nil: none).
func Rules(lb *armnetwork.LoadBalancer) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	return len(lb.Properties.LoadBalancingRules)
}

// ServiceRules counts the load balancing rules of lb that belong to the service svcLBName.
func ServiceRules(lb *armnetwork.LoadBalancer, svcLBName string) int {
	if lb == nil || lb.Properties == nil {
		return 0
	}
	n := 0
	for _, r := range lb.Properties.LoadBalancingRules {
		if r != nil && naming.OwnedByService(svcLBName, str(r.Name)) {
			n++
		}
	}
	return n
}
