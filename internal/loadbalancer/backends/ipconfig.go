package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/azureid"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/membership"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// nicParallelism bounds the concurrent NIC writes of one pool sync; putVMSSVMBatchSize does not
// apply to them.
const nicParallelism = 10

// scaleSetVMBatch is how many scale set instances one pool sync writes at a time: azure.json
// putVMSSVMBatchSize, or one at a time when it is unset (0), as in the existing provider.
func scaleSetVMBatch(configured int) int { return max(configured, 1) }

// runEdits runs f for every edit, at most limit(kind) of each kind at a time (at least one);
// the kinds do not wait for each other.
func runEdits(edits []membership.Edit, limit func(membership.Kind) int, f func(membership.Edit)) {
	sems := map[membership.Kind]chan struct{}{}
	for _, e := range edits {
		if sems[e.Kind] == nil {
			sems[e.Kind] = make(chan struct{}, max(limit(e.Kind), 1))
		}
	}
	var wg sync.WaitGroup
	for _, e := range edits {
		sem := sems[e.Kind]
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			f(e)
		})
	}
	wg.Wait()
}

// ipConfigBackends keeps nodeIPConfiguration pools in step: a node joins by its primary NIC's ip
// configuration referencing the pool (IPv4 configuration → <cluster>, IPv6 → <cluster>-IPv6).
// Standalone, availability-set and Flexible scale set VMs are written through their NIC;
// Uniform scale set VMs through the instance's network profile; scale set models (Uniform, and
// Flexible with a VM profile) get the pool too so new instances join. Every resource has one group-commit writer, so concurrent
// service reconciles touching one NIC share its read-modify-write.
//
// Current membership is read from the pools' backendIPConfigurations back-references on the
// load balancer (as the existing provider does); the writes themselves are read-modify-write
// of each resource, so a stale load balancer costs reads, never a wrong write.
type ipConfigBackends struct {
	filter  membership.NodeFilter
	resolve func(ctx context.Context, n *v1.Node) (target, error)

	// subscription of the scale sets (their writers are keyed by resource ID).
	subscription string
	nics         *writer.Registry[armnetwork.Interface]
	vmssVMs      *writer.Registry[armcompute.VirtualMachineScaleSetVM]
	scaleSets    *writer.Registry[armcompute.VirtualMachineScaleSet]

	// listScaleSets returns the scale set models of a resource group (a list cache), so the
	// model check costs no GET in steady state. Optional.
	listScaleSets func(ctx context.Context, rg string) ([]*armcompute.VirtualMachineScaleSet, error)
	// listedScaleSetVM and listedNIC return a resource as its list cache has it, with its ETag
	// (nil when not listed), so its writer needs no GET before the write: the resolver listed
	// the scale set or resource group already. Optional.
	listedScaleSetVM func(ctx context.Context, rg, scaleSet, instanceID string) (*armcompute.VirtualMachineScaleSetVM, string)
	listedNIC        func(ctx context.Context, rg, id string) (*armnetwork.Interface, string)
	// Cache invalidation after writes (optional).
	nicWritten      func(rg string)
	scaleSetWritten func(rg, scaleSet string, model bool)
	// lbChanged says that Azure changed a load balancer as a side effect of NIC or scale set VM
	// writes: its pools' back-references to the ip configurations.
	lbChanged func(lbID string)
	// inLBTurn runs f in the load balancer writer's turn (between its batches), so the
	// writes that change the load balancer as a side effect never overlap a write of it: each
	// overlap cost a 412 and a re-sent load balancer, and a burst of them failed service syncs.
	// Services queued at the writer behind f still join the batch being taken (DoBetween):
	// in a burst every service's reconcile queues one f, and each would otherwise end a batch.
	// Optional (nil: f runs at once).
	inLBTurn func(ctx context.Context, lbID string, f func(ctx context.Context) error) error

	batch int
	// preConfigured is azure.json preConfiguredBackendPoolLoadBalancerTypes ("", internal,
	// external, all): the pools of those load balancers are managed by someone else.
	preConfigured string
}

// managed reports whether this implementation manages the pool members of lb.
func (b *ipConfigBackends) managed(lb *armnetwork.LoadBalancer) bool {
	return !PreConfigured(b.preConfigured, str(lb.Name))
}

// clusterPool is one of the cluster's pools on a load balancer.
type clusterPool struct {
	family  naming.Family
	id      string
	current []string
}

func clusterPools(lb *armnetwork.LoadBalancer, clusterName string) []clusterPool {
	var out []clusterPool
	for _, fam := range []naming.Family{naming.IPv4, naming.IPv6} {
		p := FindPool(lb, naming.BackendPoolName(clusterName, fam))
		if p == nil {
			continue
		}
		id := str(p.ID)
		if id == "" {
			id = str(lb.ID) + "/backendAddressPools/" + str(p.Name)
		}
		cp := clusterPool{family: fam, id: id}
		if p.Properties != nil {
			for _, r := range p.Properties.BackendIPConfigurations {
				if r != nil && r.ID != nil {
					cp.current = append(cp.current, *r.ID)
				}
			}
		}
		out = append(out, cp)
	}
	return out
}

// pickIPConfig is the ip configuration of the family that joins the pool: the first of the
// primary NIC's configurations of that family (they come primary first).
func pickIPConfig(configs []nodes.IPConfiguration, fam naming.Family) string {
	for _, c := range configs {
		if c.IPv6 == (fam == naming.IPv6) && c.ID != "" {
			return c.ID
		}
	}
	return ""
}

type scaleSetRef struct{ rg, name string }

// target is what pool membership needs to know about a node's VM.
type target struct {
	vmSet   nodes.VMSet
	configs []nodes.IPConfiguration
	// shutdown VMs (stopped, deallocated) are not added, and not removed either.
	shutdown bool
}

// resolveWith resolves nodes through the resolver's list caches.
func resolveWith(r *nodes.Resolver) func(ctx context.Context, n *v1.Node) (target, error) {
	return func(ctx context.Context, n *v1.Node) (target, error) {
		inst, err := r.Instance(ctx, n)
		if err != nil {
			return target{}, err
		}
		if inst.ProviderID.Kind == nodes.KindUnmanaged {
			return target{}, fmt.Errorf("node %s is not an Azure VM", n.Name)
		}
		configs, err := r.IPConfigurations(ctx, inst)
		if err != nil {
			return target{}, err
		}
		return target{vmSet: inst.VMSet, configs: configs, shutdown: inst.IsShutdown()}, nil
	}
}

func (b *ipConfigBackends) Sync(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer, nodeList []*v1.Node) error {
	pools := clusterPools(lb, clusterName)
	if len(pools) == 0 || !b.managed(lb) {
		return nil
	}
	var errs []error
	complete := true
	want, keep := map[naming.Family][]string{}, map[naming.Family][]string{}
	// Scale sets of eligible nodes, with the families their instances join.
	models := map[string]map[naming.Family]bool{}
	modelRefs := map[string]scaleSetRef{}
	for _, n := range b.filter.Eligible(nodeList) {
		t, err := b.resolve(ctx, n)
		if errors.Is(err, nodes.ErrInstanceNotFound) {
			// The VM is gone: nothing to add, and its ip configurations left the pool with it.
			klog.V(4).InfoS("Node has no VM; not added to backend pools", "node", n.Name)
			continue
		}
		if err != nil {
			complete = false
			errs = append(errs, fmt.Errorf("node %s: %w", n.Name, err))
			continue
		}
		for _, p := range pools {
			id := pickIPConfig(t.configs, p.family)
			if id == "" {
				continue
			}
			if t.shutdown {
				keep[p.family] = append(keep[p.family], id)
				continue
			}
			want[p.family] = append(want[p.family], id)
			// Scale set models get the pool too, so new instances join (Flexible ones with a
			// VM profile as well, as the existing provider does).
			if t.vmSet.Kind == nodes.VMSetScaleSetUniform || t.vmSet.Kind == nodes.VMSetScaleSetFlex {
				k := strings.ToLower(t.vmSet.ResourceGroup + "/" + t.vmSet.Name)
				if models[k] == nil {
					models[k] = map[naming.Family]bool{}
					modelRefs[k] = scaleSetRef{t.vmSet.ResourceGroup, t.vmSet.Name}
				}
				models[k][p.family] = true
			}
		}
	}
	var in []membership.Pool
	for _, p := range pools {
		in = append(in, membership.Pool{ID: p.id, Want: want[p.family], Current: p.current, Keep: keep[p.family]})
	}
	// A node that could not be resolved may be a member: remove nothing rather than a node
	// that is still eligible.
	edits, skipped := membership.Plan(in, complete)
	if len(skipped) > 0 {
		klog.V(4).InfoS("Backend pool members that are neither NIC nor scale set VM ip configurations are left alone", "ids", skipped)
	}
	// Scale set models that lack a pool (by the list cache): written in the same turn as the
	// instances, since a model write changes the instances' ETags and an instance write seeded
	// before it would be refused with 412.
	type modelPool struct {
		ss   scaleSetRef
		pool string
		ipv6 bool
	}
	var modelWrites []modelPool
	for k, fams := range models {
		for _, p := range pools {
			if !fams[p.family] {
				continue
			}
			has, err := b.modelHasPool(ctx, modelRefs[k], p.id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !has {
				modelWrites = append(modelWrites, modelPool{modelRefs[k], p.id, p.family == naming.IPv6})
			}
		}
	}
	var wrote bool
	var modelErrs []error
	apply := func(ctx context.Context) (err error) {
		for _, m := range modelWrites {
			if err := b.ensureModel(ctx, m.ss, m.pool, m.ipv6); err != nil {
				modelErrs = append(modelErrs, err)
			}
		}
		wrote, err = b.apply(ctx, edits)
		return err
	}
	var err error
	if b.inLBTurn != nil && (len(edits) > 0 || len(modelWrites) > 0) {
		err = b.inLBTurn(ctx, str(lb.ID), apply)
	} else {
		err = apply(ctx)
	}
	errs = append(errs, modelErrs...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(edits) > 0 {
		adds, removes := countChanges(edits)
		klog.V(2).InfoS("Synced backend pool membership", "loadBalancer", str(lb.Name), "resources", len(edits),
			"joins", adds, "leaves", removes, "wrote", wrote)
	}
	if wrote && b.lbChanged != nil {
		// Back-references on the load balancer changed: its writer must re-read.
		b.lbChanged(str(lb.ID))
	}
	return errors.Join(errs...)
}

func countChanges(edits []membership.Edit) (adds, removes int) {
	for _, e := range edits {
		for _, c := range e.Changes {
			if c.Add {
				adds++
			} else {
				removes++
			}
		}
	}
	return adds, removes
}

// Detach removes every member of the cluster's pools of lb and the pools from scale set models
// (before the load balancer is deleted; Azure refuses to delete a load balancer whose pools are
// still referenced).
func (b *ipConfigBackends) Detach(ctx context.Context, clusterName string, lb *armnetwork.LoadBalancer) error {
	pools := clusterPools(lb, clusterName)
	if len(pools) == 0 || !b.managed(lb) {
		return nil
	}
	var in []membership.Pool
	rgs := map[string]bool{}
	if b.filter.ResourceGroup != "" {
		rgs[strings.ToLower(b.filter.ResourceGroup)] = true
	}
	for _, p := range pools {
		in = append(in, membership.Pool{ID: p.id, Current: p.current})
		for _, id := range p.current {
			if r, err := membership.ParseIPConfigID(id); err == nil && r.Kind == membership.KindScaleSetVM {
				rgs[strings.ToLower(r.ResourceGroup)] = true
			}
		}
	}
	var errs []error
	if b.listScaleSets != nil {
		for rg := range rgs {
			sets, err := b.listScaleSets(ctx, rg)
			if err != nil {
				errs = append(errs, fmt.Errorf("listing scale sets of %s: %w", rg, err))
				continue
			}
			for _, ss := range sets {
				for _, p := range pools {
					if membership.ModelHasPool(ss, p.id) {
						errs = append(errs, b.removeModelPool(ctx, scaleSetRef{rg, str(ss.Name)}, p.id))
					}
				}
			}
		}
	}
	edits, _ := membership.Plan(in, true)
	wrote, err := b.apply(ctx, edits)
	errs = append(errs, err)
	if wrote && b.lbChanged != nil {
		b.lbChanged(str(lb.ID))
	}
	return errors.Join(errs...)
}

// apply writes the edits (scale set instances scaleSetVMBatch at a time, the others
// nicParallelism at a time) and reports whether anything was written. The node caches are
// dropped once per resource group / scale set afterwards (not per write: a burst of NIC writes
// must not cause a burst of re-lists).
func (b *ipConfigBackends) apply(ctx context.Context, edits []membership.Edit) (bool, error) {
	if len(edits) == 0 {
		return false, nil
	}
	var (
		mu        sync.Mutex
		errs      []error
		nicRGs    = map[string]bool{}
		scaleSets = map[scaleSetRef]bool{}
	)
	limit := func(k membership.Kind) int {
		if k == membership.KindScaleSetVM {
			return scaleSetVMBatch(b.batch)
		}
		return nicParallelism
	}
	runEdits(edits, limit, func(e membership.Edit) {
		wrote, err := b.applyOne(ctx, e)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if wrote && e.Kind == membership.KindScaleSetVM {
			scaleSets[scaleSetRef{strings.ToLower(e.ResourceGroup), strings.ToLower(e.ScaleSet)}] = true
		} else if wrote {
			nicRGs[strings.ToLower(e.ResourceGroup)] = true
		}
	})
	for rg := range nicRGs {
		if b.nicWritten != nil {
			b.nicWritten(rg)
		}
	}
	for ss := range scaleSets {
		if b.scaleSetWritten != nil {
			b.scaleSetWritten(ss.rg, ss.name, false)
		}
	}
	return len(nicRGs)+len(scaleSets) > 0, errors.Join(errs...)
}

// applyOne writes one resource's changes through its writer; wrote reports a change (made by
// this call's mutation; an identical change already merged by another caller is not counted).
func (b *ipConfigBackends) applyOne(ctx context.Context, e membership.Edit) (wrote bool, err error) {
	switch e.Kind {
	case membership.KindScaleSetVM:
		w := b.vmssVMs.For(e.Owner)
		if b.listedScaleSetVM != nil {
			if vm, etag := b.listedScaleSetVM(ctx, e.ResourceGroup, e.ScaleSet, e.InstanceID); vm != nil {
				w.Seed(vm, etag)
			}
		}
		_, err = w.Submit(ctx, func(cur *armcompute.VirtualMachineScaleSetVM) (*armcompute.VirtualMachineScaleSetVM, error) {
			if cur == nil {
				// The instance is gone: so are its pool references.
				return nil, errGone
			}
			changed, err := membership.ApplyToScaleSetVM(cur, e.Changes)
			wrote = wrote || changed
			return cur, err
		})
		if err != nil && !errors.Is(err, errGone) {
			return wrote, fmt.Errorf("scale set VM %s/%s: %w", e.ScaleSet, e.InstanceID, err)
		}
	default:
		w := b.nics.For(e.Owner)
		if b.listedNIC != nil {
			if nic, etag := b.listedNIC(ctx, e.ResourceGroup, e.Owner); nic != nil {
				w.Seed(nic, etag)
			}
		}
		_, err = w.Submit(ctx, func(cur *armnetwork.Interface) (*armnetwork.Interface, error) {
			if cur == nil {
				return nil, errGone
			}
			changed, err := membership.ApplyToNIC(cur, e.Changes)
			wrote = wrote || changed
			return cur, err
		})
		if err != nil && !errors.Is(err, errGone) {
			return wrote, fmt.Errorf("network interface %s: %w", azureid.Name(e.Owner), err)
		}
	}
	return wrote, nil
}

// errGone fails a mutation whose resource no longer exists (the writer must not create or
// delete a NIC or an instance).
var errGone = errors.New("resource no longer exists")

// scaleSetID is the writer key of a scale set model.
func (b *ipConfigBackends) scaleSetID(ss scaleSetRef) string {
	return azureid.ScaleSet(b.subscription, ss.rg, ss.name)
}

// ensureModel adds the pool to a scale set model unless the (cached) model has it or has no
// network profile.
func (b *ipConfigBackends) ensureModel(ctx context.Context, ss scaleSetRef, poolID string, ipv6 bool) error {
	if has, err := b.modelHasPool(ctx, ss, poolID); err != nil || has {
		return err
	}
	var wrote bool
	_, err := b.scaleSets.For(b.scaleSetID(ss)).Submit(ctx, func(cur *armcompute.VirtualMachineScaleSet) (*armcompute.VirtualMachineScaleSet, error) {
		if cur == nil {
			return nil, errGone
		}
		wrote = membership.AddModelPool(cur, poolID, ipv6) || wrote
		return cur, nil
	})
	if errors.Is(err, errGone) {
		return nil
	}
	if wrote && b.scaleSetWritten != nil {
		b.scaleSetWritten(ss.rg, ss.name, true)
	}
	if err != nil {
		return fmt.Errorf("scale set %s model: %w", ss.name, err)
	}
	return nil
}

// modelHasPool reports whether the scale set's model, as the list cache has it, needs no pool
// write (it has the pool, or no NIC configuration to put it on). Without a list cache it says
// no: the writer then reads the model and writes only if the pool is missing.
func (b *ipConfigBackends) modelHasPool(ctx context.Context, ss scaleSetRef, poolID string) (bool, error) {
	if b.listScaleSets == nil {
		return false, nil
	}
	sets, err := b.listScaleSets(ctx, ss.rg)
	if err != nil {
		return false, fmt.Errorf("listing scale sets of %s: %w", ss.rg, err)
	}
	for _, s := range sets {
		if strings.EqualFold(str(s.Name), ss.name) && (membership.ModelHasPool(s, poolID) || len(membership.ModelNICConfigs(s)) == 0) {
			return true, nil
		}
	}
	return false, nil
}

func (b *ipConfigBackends) removeModelPool(ctx context.Context, ss scaleSetRef, poolID string) error {
	var wrote bool
	_, err := b.scaleSets.For(b.scaleSetID(ss)).Submit(ctx, func(cur *armcompute.VirtualMachineScaleSet) (*armcompute.VirtualMachineScaleSet, error) {
		if cur == nil {
			return nil, errGone
		}
		wrote = membership.RemoveModelPool(cur, poolID) || wrote
		return cur, nil
	})
	if errors.Is(err, errGone) {
		return nil
	}
	if wrote && b.scaleSetWritten != nil {
		b.scaleSetWritten(ss.rg, ss.name, true)
	}
	if err != nil {
		return fmt.Errorf("scale set %s model: %w", ss.name, err)
	}
	return nil
}

// newIPConfig builds the NIC-based implementation on the provider's writers.
func newIPConfig(o Options) *ipConfigBackends {
	lbs := o.Writers.LoadBalancers
	b := &ipConfigBackends{
		filter:        membership.NodeFilter{ExcludeControlPlane: o.Config.ExcludeMasters(), ResourceGroup: o.Config.ResourceGroup},
		resolve:       resolveWith(o.Nodes),
		batch:         o.Config.PutVMSSVMBatchSize,
		preConfigured: o.Config.PreConfiguredBackendPoolLoadBalancerTypes,
		subscription:  o.Config.SubscriptionID,
		nics:          o.Writers.Interfaces,
		vmssVMs:       o.Writers.ScaleSetVMs,
		scaleSets:     o.Writers.ScaleSets,
		lbChanged:     func(lbID string) { lbs.For(lbID).Invalidate() },
		inLBTurn: func(ctx context.Context, lbID string, f func(ctx context.Context) error) error {
			return lbs.For(lbID).DoBetween(ctx, func(ctx context.Context, _ writer.Store[armnetwork.LoadBalancer]) error { return f(ctx) })
		},
	}
	if c := o.Caches; c != nil {
		b.listScaleSets = c.ScaleSets.Get
		b.listedScaleSetVM = func(ctx context.Context, rg, ss, instanceID string) (*armcompute.VirtualMachineScaleSetVM, string) {
			vm, ok, err := c.ScaleSetVMs.Lookup(ctx, arm.ScaleSetKey(rg, ss), func(vm *armcompute.VirtualMachineScaleSetVM) bool {
				return vm.InstanceID != nil && *vm.InstanceID == instanceID
			})
			if err != nil || !ok {
				return nil, ""
			}
			return vm, str(vm.Etag)
		}
		b.listedNIC = func(ctx context.Context, rg, id string) (*armnetwork.Interface, string) {
			nic, ok, err := c.NICs.Lookup(ctx, rg, func(n *armnetwork.Interface) bool { return n.ID != nil && strings.EqualFold(*n.ID, id) })
			if err != nil || !ok {
				return nil, ""
			}
			return nic, str(nic.Etag)
		}
		b.nicWritten = func(rg string) { c.NICs.Invalidate(rg) }
		b.scaleSetWritten = func(rg, ss string, model bool) {
			k := arm.ScaleSetKey(rg, ss)
			if model {
				// A model change also changes every instance (latestModelApplied, ETag): the
				// listed instances would seed their writers with stale ETags.
				c.ScaleSets.Invalidate(rg)
				c.ScaleSetVMs.Invalidate(k)
				return
			}
			c.ScaleSetVMs.Invalidate(k)
			c.ScaleSetNICs.Invalidate(k)
		}
	}
	return b
}
