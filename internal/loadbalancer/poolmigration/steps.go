package poolmigration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azstore"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/backends"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/parallel"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

var (
	// errGone fails a mutation whose resource no longer exists (nothing left to change).
	errGone = errors.New("resource no longer exists")
	// errStillMembers: a pool to finish still has NIC members (one joined meanwhile); the next
	// round detaches it.
	errStillMembers = errors.New("still has NIC-based members")
)

// execute runs the plan's phases in order; a phase runs its steps concurrently and the next
// one starts only when all of them succeeded.
func (x *executor) execute(ctx context.Context, p *Plan, in Input, attempt int) error {
	klog.InfoS("Backend pool migration to IP-based", "attempt", attempt, "loadBalancers", len(p.LoadBalancers), "steps", p.Counts())
	for _, w := range p.Warnings {
		klog.ErrorS(nil, "Backend pool migration warning", "warning", w)
	}
	if !x.announced["start"] {
		x.announced["start"] = true
		how := "through a staging pool, so no node leaves the pools the rules use"
		if in.UseAPI {
			how = "with the load balancer's migrateToIpBased operation (enableMigrateToIPBasedBackendPoolAPI)"
		}
		x.eventServices(ctx, v1.EventTypeNormal, ReasonMigrating, "Moving the load balancer's backend pools from NIC-based to IP-based membership "+how)
		for _, w := range p.Warnings {
			x.eventServices(ctx, v1.EventTypeWarning, ReasonWarning, w)
		}
	}
	for _, ph := range Phases() {
		stepsOf := p.Of(ph)
		if len(stepsOf) == 0 {
			continue
		}
		began := time.Now()
		if ph == PhaseFinish {
			// NIC and scale set writes changed the pools' back-references: read again.
			for _, s := range stepsOf {
				x.o.Writers.LoadBalancers.For(s.Target).Invalidate()
			}
		}
		if err := x.parallel(ctx, stepsOf, x.step); err != nil {
			return fmt.Errorf("phase %s: %w", ph, err)
		}
		x.mu.Lock()
		x.res.Steps[ph.String()] += len(stepsOf)
		x.mu.Unlock()
		klog.InfoS("Backend pool migration phase done", "phase", ph.String(), "steps", len(stepsOf), "duration", time.Since(began).Round(time.Millisecond))
		if x.o.AfterPhase != nil {
			x.o.AfterPhase(ph)
		}
	}
	return nil
}

// parallel runs fn for every step, at most Concurrency at a time, and joins the errors.
func (x *executor) parallel(ctx context.Context, ss []Step, fn func(context.Context, Step) error) error {
	return errors.Join(parallel.Do(ctx, x.o.Concurrency, len(ss), func(ctx context.Context, i int) error {
		err := fn(ctx, ss[i])
		result := "success"
		if err != nil {
			result = "error"
		}
		steps.WithLabelValues(ss[i].Phase.String(), result).Inc()
		return err
	})...)
}

// step runs one step as a conditional read-modify-write through the resource's writer.
func (x *executor) step(ctx context.Context, s Step) error {
	var err error
	switch s.Phase {
	case PhaseStage:
		_, err = x.o.Writers.LoadBalancers.For(s.Target).Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
			if cur == nil || cur.Properties == nil {
				return nil, errGone
			}
			return cur, x.stage(cur, s.Pools)
		})
	case PhaseMigrateAPI:
		err = x.migrateAPI(ctx, s)
	case PhaseFinish:
		_, err = x.o.Writers.LoadBalancers.For(s.Target).Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
			if cur == nil || cur.Properties == nil {
				return nil, errGone
			}
			return cur, finish(cur, s.Pools)
		})
	case PhaseDetachModels:
		rg := azureid.ResourceGroup(s.Target)
		_, err = x.o.Writers.ScaleSets.For(s.Target).Submit(ctx, func(cur *armcompute.VirtualMachineScaleSet) (*armcompute.VirtualMachineScaleSet, error) {
			if cur == nil {
				return nil, errGone
			}
			for _, id := range s.PoolIDs {
				membership.RemoveModelPool(cur, id)
			}
			return cur, nil
		})
		x.o.Caches.ScaleSets.Invalidate(rg)
	case PhaseDetachNodes:
		err = x.detach(ctx, *s.Edit)
	default:
		return fmt.Errorf("unexpected step %s", s.Phase)
	}
	if errors.Is(err, errGone) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.Phase, azureid.Name(s.Target), err)
	}
	return nil
}

// stage adds each staging pool (with its addresses) and hands it the rules of its pool.
func (x *executor) stage(lb *armnetwork.LoadBalancer, pools []PoolStep) error {
	vnet := backends.VNetID(x.o.Config)
	for _, ps := range pools {
		staging := FindPool(lb, ps.Staging)
		if staging == nil {
			if ps.Entries == nil {
				return fmt.Errorf("staging pool %s is gone and its addresses are unknown", ps.Staging)
			}
			staging = &armnetwork.BackendAddressPool{Name: to.Ptr(ps.Staging)}
			membership.SetAddresses(staging, ps.Entries, vnet)
			if x.o.PoolEntries != nil {
				x.o.PoolEntries(staging)
			}
			lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, staging)
		}
		Retarget(lb, PoolID(lb, ps.Pool), PoolID(lb, ps.Staging))
	}
	return nil
}

// finish gives each emptied pool the staging pool's addresses, hands its rules back and drops
// the staging pool, in one write.
func finish(lb *armnetwork.LoadBalancer, pools []PoolStep) error {
	for _, ps := range pools {
		pool, staging := FindPool(lb, ps.Pool), FindPool(lb, ps.Staging)
		if staging == nil {
			continue // finished already
		}
		if pool == nil {
			pool = &armnetwork.BackendAddressPool{Name: to.Ptr(ps.Pool)}
			lb.Properties.BackendAddressPools = append(lb.Properties.BackendAddressPools, pool)
		}
		if HasNICMembers(pool) {
			return fmt.Errorf("backend pool %s %w", ps.Pool, errStillMembers)
		}
		if pool.Properties == nil {
			pool.Properties = &armnetwork.BackendAddressPoolPropertiesFormat{}
		}
		if staging.Properties != nil {
			pool.Properties.LoadBalancerBackendAddresses = staging.Properties.LoadBalancerBackendAddresses
			pool.Properties.VirtualNetwork = staging.Properties.VirtualNetwork
		}
		Retarget(lb, PoolID(lb, ps.Staging), PoolID(lb, ps.Pool))
		kept := lb.Properties.BackendAddressPools[:0]
		for _, p := range lb.Properties.BackendAddressPools {
			if p != staging {
				kept = append(kept, p)
			}
		}
		lb.Properties.BackendAddressPools = kept
	}
	return nil
}

// migrateAPI calls migrateToIpBased through the load balancer's writer and waits until the
// pools hold addresses and no member.
func (x *executor) migrateAPI(ctx context.Context, s Step) error {
	var names []string
	for _, ps := range s.Pools {
		names = append(names, ps.Pool)
	}
	w := x.o.Writers.LoadBalancers.For(s.Target)
	err := w.Do(ctx, func(ctx context.Context, st writer.Store[armnetwork.LoadBalancer]) error {
		m, ok := st.(azstore.PoolMigrator)
		if !ok {
			return errors.New("this load balancer store cannot call migrateToIpBased")
		}
		migrated, err := m.MigrateToIPBased(ctx, names)
		if err == nil {
			klog.InfoS("migrateToIpBased answered", "loadBalancer", azureid.Name(s.Target), "migratedPools", migrated)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("migrateToIpBased: %w", err)
	}
	deadline := time.Now().Add(x.o.APIWait)
	for {
		w.Invalidate()
		lb, err := w.Peek(ctx)
		if err != nil {
			return err
		}
		done := lb != nil
		for _, ps := range s.Pools {
			p := FindPool(lb, ps.Pool)
			done = done && p != nil && !HasNICMembers(p)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("migrateToIpBased: the pools still have NIC-based members after %s", x.o.APIWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// detach writes one NIC's or scale set instance's pool removals, then drops the lists that held
// it.
func (x *executor) detach(ctx context.Context, e membership.Edit) error {
	var err error
	if e.Kind == membership.KindScaleSetVM {
		_, err = x.o.Writers.ScaleSetVMs.For(e.Owner).Submit(ctx, func(cur *armcompute.VirtualMachineScaleSetVM) (*armcompute.VirtualMachineScaleSetVM, error) {
			if cur == nil {
				return nil, errGone
			}
			_, err := membership.ApplyToScaleSetVM(cur, e.Changes)
			return cur, err
		})
		k := arm.ScaleSetKey(e.ResourceGroup, e.ScaleSet)
		x.o.Caches.ScaleSetVMs.Invalidate(k)
		x.o.Caches.ScaleSetNICs.Invalidate(k)
	} else {
		_, err = x.o.Writers.Interfaces.For(e.Owner).Submit(ctx, func(cur *armnetwork.Interface) (*armnetwork.Interface, error) {
			if cur == nil {
				return nil, errGone
			}
			_, err := membership.ApplyToNIC(cur, e.Changes)
			return cur, err
		})
		x.o.Caches.NICs.Invalidate(strings.ToLower(e.ResourceGroup))
	}
	return err
}
