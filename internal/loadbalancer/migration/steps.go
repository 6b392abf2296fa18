package migration

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/parallel"
)

// errGone fails a mutation whose resource no longer exists (nothing to detach or upgrade).
var errGone = errors.New("resource no longer exists")

// execute runs the plan's phases in order; a phase runs its steps concurrently and the next
// phase starts only when all of them succeeded.
func (x *executor) execute(ctx context.Context, p *Plan, nodes []*v1.Node, attempt int) error {
	klog.InfoS("Basic to Standard load balancer migration", "attempt", attempt, "basicLoadBalancers", len(p.BasicLBs),
		"services", len(p.Services), "steps", p.Counts())
	for _, w := range p.Warnings {
		klog.ErrorS(nil, "Basic to Standard migration warning", "warning", w)
	}
	for _, sp := range p.Services {
		if !x.announced[sp.Key] {
			x.announced[sp.Key] = true
			x.event(sp, v1.EventTypeNormal, ReasonMigrating, fmt.Sprintf("Moving the service from the Basic to the Standard load balancer, keeping %v (%d Basic load balancers, %d steps)",
				sp.IPs, len(p.BasicLBs), len(p.Steps)))
			for _, w := range sp.Warnings {
				x.event(sp, v1.EventTypeWarning, ReasonWarning, w)
			}
		}
	}
	for _, ph := range Phases() {
		steps := p.Of(ph)
		if len(steps) == 0 {
			continue
		}
		began := time.Now()
		var err error
		switch ph {
		case PhaseHandOff:
			err = x.handOff(ctx, steps, nodes)
		case PhaseUpgradePIPs:
			// Inside the downtime window: every public IP at once (each is its own resource).
			err = x.parallelN(ctx, min(len(steps), maxHandOff), steps, x.step)
		default:
			err = x.parallel(ctx, steps, x.step)
		}
		if err != nil {
			return fmt.Errorf("phase %s: %w", ph, err)
		}
		switch ph {
		case PhaseDeleteLBs:
			x.res.BasicLBs += len(steps)
		case PhaseUpgradePIPs:
			x.res.PublicIPs += len(steps)
		case PhaseDetachModels, PhaseDetachNodes:
			x.res.NodeWrites += len(steps)
		}
		klog.InfoS("Migration phase done", "phase", ph.String(), "steps", len(steps), "duration", time.Since(began).Round(time.Millisecond))
		if x.o.AfterPhase != nil {
			x.o.AfterPhase(ph)
		}
	}
	return nil
}

// maxHandOff bounds the services handed off at once.
const maxHandOff = 256

// parallel runs fn for every step, at most Concurrency at a time, and joins the errors.
func (x *executor) parallel(ctx context.Context, steps []Step, fn func(context.Context, Step) error) error {
	return x.parallelN(ctx, x.o.Concurrency, steps, fn)
}

func (x *executor) parallelN(ctx context.Context, n int, steps []Step, fn func(context.Context, Step) error) error {
	return errors.Join(parallel.Do(ctx, n, len(steps), func(ctx context.Context, i int) error {
		return fn(ctx, steps[i])
	})...)
}

// step runs one Azure step as a conditional read-modify-write (412: re-read and re-apply).
func (x *executor) step(ctx context.Context, s Step) error {
	var err error
	switch s.Phase {
	case PhaseStaticPIPs, PhaseUpgradePIPs:
		w := x.o.Writers.PublicIPs.For(s.Target)
		upgrade := s.Phase == PhaseUpgradePIPs
		_, err = w.Submit(ctx, func(cur *armnetwork.PublicIPAddress) (*armnetwork.PublicIPAddress, error) {
			if cur == nil {
				return nil, errGone
			}
			if cur.Properties == nil {
				cur.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
			}
			cur.Properties.PublicIPAllocationMethod = to.Ptr(armnetwork.IPAllocationMethodStatic)
			if upgrade {
				cur.SKU = &armnetwork.PublicIPAddressSKU{Name: to.Ptr(armnetwork.PublicIPAddressSKUNameStandard),
					Tier: to.Ptr(armnetwork.PublicIPAddressSKUTierRegional)}
			}
			return cur, nil
		})
	case PhaseDetachModels:
		w := x.o.Writers.ScaleSets.For(s.Target)
		_, err = w.Submit(ctx, func(cur *armcompute.VirtualMachineScaleSet) (*armcompute.VirtualMachineScaleSet, error) {
			if cur == nil {
				return nil, errGone
			}
			for _, id := range s.PoolIDs {
				membership.RemoveModelPool(cur, id)
			}
			return cur, nil
		})
	case PhaseDetachNodes:
		err = x.detach(ctx, *s.Edit)
	case PhaseDeleteLBs:
		w := x.o.Writers.LoadBalancers.For(s.Target)
		_, err = w.Submit(ctx, func(cur *armnetwork.LoadBalancer) (*armnetwork.LoadBalancer, error) {
			if cur != nil && !isBasic(cur) {
				// Never delete a Standard load balancer that took the name meanwhile.
				return cur, nil
			}
			return nil, nil
		})
		if err == nil {
			x.mu.Lock()
			x.deletedAt[strings.ToLower(s.Target)] = time.Now()
			x.mu.Unlock()
			klog.V(2).InfoS("Migration: deleted Basic load balancer", "loadBalancer", s.Target)
		}
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

// detach writes one NIC's or scale set VM's pool removals.
func (x *executor) detach(ctx context.Context, e membership.Edit) error {
	if e.Kind == membership.KindScaleSetVM {
		_, err := x.o.Writers.ScaleSetVMs.For(e.Owner).Submit(ctx, func(cur *armcompute.VirtualMachineScaleSetVM) (*armcompute.VirtualMachineScaleSetVM, error) {
			if cur == nil {
				return nil, errGone
			}
			_, err := membership.ApplyToScaleSetVM(cur, e.Changes)
			return cur, err
		})
		return err
	}
	_, err := x.o.Writers.Interfaces.For(e.Owner).Submit(ctx, func(cur *armnetwork.Interface) (*armnetwork.Interface, error) {
		if cur == nil {
			return nil, errGone
		}
		_, err := membership.ApplyToNIC(cur, e.Changes)
		return cur, err
	})
	return err
}

// handOff gives every service to the Standard path at once (the load balancer writer merges
// their changes into few writes). An internal service that has no Standard frontend yet is
// pinned to its status address with an in-memory annotation: the Standard path then creates its
// frontend Static at that address and keeps it on every later reconcile.
func (x *executor) handOff(ctx context.Context, steps []Step, nodes []*v1.Node) error {
	// All at once: the load balancer and NSG writers merge concurrent services into one write
	// each, so the last service's rules land as early as the first one's.
	return x.parallelN(ctx, min(len(steps), maxHandOff), steps, func(ctx context.Context, s Step) error {
		sp := s.Service
		svc := pinned(sp)
		st, err := x.o.LoadBalancer.EnsureLoadBalancer(ctx, x.o.ClusterName, svc, nodes)
		x.mu.Lock()
		if err != nil {
			x.unfinished[sp.Key] = sp
		} else {
			delete(x.unfinished, sp.Key)
		}
		x.mu.Unlock()
		if err != nil {
			return fmt.Errorf("service %s: %w", sp.Key, err)
		}
		done := time.Now()
		x.mu.Lock()
		deleted := x.deletedAt[strings.ToLower(sp.BasicLB)]
		x.mu.Unlock()
		x.record(sp, deleted, done)
		var got []netip.Addr
		if st != nil {
			for _, ing := range st.Ingress {
				if a, err := netip.ParseAddr(ing.IP); err == nil {
					got = append(got, a.Unmap())
				}
			}
		}
		window := ""
		if !deleted.IsZero() && sp.BasicLB != "" {
			d := done.Sub(deleted)
			downtime.Observe(d.Seconds())
			window = fmt.Sprintf("; %s from its Basic load balancer's deletion to its Standard rules", d.Round(time.Millisecond))
		}
		for _, a := range sp.IPs {
			if !slices.Contains(got, a) {
				x.event(sp, v1.EventTypeWarning, ReasonIPChanged, fmt.Sprintf("The service's address %s was not kept by the Standard load balancer (now %v)", a, got))
				klog.ErrorS(nil, "Migration changed a service's address", "service", sp.Key, "old", sp.IPs, "new", got)
				break
			}
		}
		x.event(sp, v1.EventTypeNormal, ReasonMigrated, fmt.Sprintf("Served by the Standard load balancer with %v%s", got, window))
		klog.V(2).InfoS("Migration: service handed to the Standard load balancer", "service", sp.Key, "ips", got, "window", window)
		return nil
	})
}

func (x *executor) record(sp *ServicePlan, deleted, done time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.res.Services++
	x.handed = append(x.handed, sp)
	if !deleted.IsZero() && sp.BasicLB != "" {
		x.res.Downtime[sp.Key] = done.Sub(deleted)
	}
}

// pinned returns the service to hand over: an internal service without a Standard frontend
// gets its status addresses as the family annotations (in memory only, never written to the
// API), unless the user chose an address.
func pinned(sp *ServicePlan) *v1.Service {
	if !sp.Internal || sp.OnStandard || len(sp.IPs) == 0 {
		return sp.Svc
	}
	svc := sp.Svc.DeepCopy()
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	userIP := strings.TrimSpace(svc.Spec.LoadBalancerIP)
	for _, a := range sp.IPs {
		key := annotations.IPv4
		if a.Is6() {
			key = annotations.IPv6
		}
		if strings.TrimSpace(svc.Annotations[key]) != "" {
			continue
		}
		if ua, err := netip.ParseAddr(userIP); err == nil && ua.Is6() == a.Is6() {
			continue
		}
		svc.Annotations[key] = a.String()
	}
	return svc
}
