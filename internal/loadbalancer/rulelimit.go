package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/multislb"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/placement"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/plan"
)

// ruleReservations holds, per load balancer, the rules of services admitted by the room check
// whose load balancer write is under way: the writer's model shows them only once the write is
// done, and without them every service of a burst would be admitted against the load balancer
// as it was when the burst began.
type ruleReservations struct {
	mu      sync.Mutex
	pending map[string]int
	// gen counts the releases per load balancer: a check made against a model read before a
	// release may have missed the released service's rules (in neither the model nor pending).
	gen map[string]uint64
}

func newRuleReservations() *ruleReservations {
	return &ruleReservations{pending: map[string]int{}, gen: map[string]uint64{}}
}

func (r *ruleReservations) generation(key string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen[key]
}

// admit runs check with the rules reserved on key and reserves what it says the service adds.
// ok is false, and nothing is checked, when a release happened since the caller read the
// generation gen (unless force): the caller reads the model again.
func (r *ruleReservations) admit(key string, gen uint64, force bool, check func(pending int) (int, error)) (release func(), ok bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && r.gen[key] != gen {
		return nil, false, nil
	}
	n, err := check(r.pending[key])
	if err != nil || n == 0 {
		return func() {}, true, err
	}
	r.pending[key] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.pending[key] -= n; r.pending[key] <= 0 {
				delete(r.pending, key)
			}
			r.gen[key]++
		})
	}, true, nil
}

// admitAttempts bounds the re-reads of admitRules while other services' writes finish; the last
// attempt checks against what it read (the load balancer write's own check stays exact).
const admitAttempts = 5

// admitRules refuses, with a Warning event and before anything of the service is written, a
// service whose rules do not fit under Azure's limit of rules per Standard load balancer
// (plan.MaxRules): its public IP is then not created. With one load balancer the service's
// added rules stay reserved there until release (idempotent) is called; with several, placement
// reserves them (multislb.Placer.CheckRoom, PlaceService).
func (l *LoadBalancer) admitRules(ctx context.Context, c *plan.Cluster, s *plan.Service) (release func(), err error) {
	if l.multi != nil {
		return func() {}, l.multi.CheckRoom(ctx, c, s)
	}
	name := c.LBName(s.Opts.Internal)
	w := l.lbWriter(c, name)
	key := strings.ToLower(c.LBID(name))
	need := plan.RuleCount(s)
	for attempt := 1; ; attempt++ {
		gen := l.rules.generation(key)
		lb, err := w.Peek(ctx)
		if err != nil {
			return nil, fmt.Errorf("load balancer %s: %w", name, err)
		}
		release, ok, err := l.rules.admit(key, gen, attempt == admitAttempts, func(pending int) (int, error) {
			return plan.CheckRoom(name, lb, s.LBName(), pending, need, plan.MaxRules)
		})
		if !ok {
			continue
		}
		if err != nil {
			l.warn(s.Svc, multislb.ReasonRuleLimitReached, err.Error())
			return nil, err
		}
		return release, nil
	}
}

// isRuleLimit reports a refusal for Azure's limit of rules (one load balancer or placement).
func isRuleLimit(err error) bool {
	var one *plan.RuleLimitError
	var placed *placement.RuleLimitError
	return errors.As(err, &one) || errors.As(err, &placed)
}

// dropCreatedPIPs deletes, after a refusal for the rule limit, the public IPs this reconcile
// created for the service (plans that found none): they are attached to nothing, and the
// service may wait long for room. A public IP the service had before stays.
func (l *LoadBalancer) dropCreatedPIPs(ctx context.Context, c *plan.Cluster, s *plan.Service, plans []plan.PublicIPPlan, refusal error) error {
	if !isRuleLimit(refusal) {
		return refusal
	}
	rg := plan.PublicIPResourceGroup(l.cfg, s)
	for _, p := range plans {
		if p.Existing != nil || p.Mutate == nil || p.UserOwned {
			continue
		}
		if err := l.releasePIP(ctx, c, s, rg, &armnetwork.PublicIPAddress{Name: to.Ptr(p.Name)}); err != nil {
			return errors.Join(refusal, err)
		}
	}
	return refusal
}
