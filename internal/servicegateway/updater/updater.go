// Package updater is the batching updater of container-based load balancing: one worker consumes a coalescing trigger and turns
// every burst of cluster changes held by the DiffTracker into as few ARM calls as possible.
// Service resources (load balancer + public IP, or NAT gateway + public IP) are written and
// registered with the gateway before any address names the service, and removed only after
// the gateway lists no address of it.
package updater

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/parallel"
	dt "github.com/azure-ccm/azure-ccm/internal/servicegateway/difftracker"
)

// Callbacks tell the controller what happened to a service (all optional).
type Callbacks struct {
	// InboundReady: the service's load balancer, public IP and registration are in place.
	InboundReady func(name, ip string)
	// Removed: the service's registration and resources are gone.
	Removed func(name string, kind dt.Kind)
	// Failed: writing a service's resources failed (retried).
	Failed func(name string, kind dt.Kind, err error)
}

// Options configure New.
type Options struct {
	Azure     *Azure
	Callbacks Callbacks
	// Parallel resource writes per pass (default 8).
	Parallel int
	// Gather is the quiet gap a pass waits for after a trigger (default 100ms), and MaxGather
	// the longest it waits while changes keep coming (default 1s): a burst that trickles in
	// becomes one call, not one per event, and a lone change waits only Gather.
	Gather, MaxGather time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failed pass (1s, 30s).
	MinBackoff, MaxBackoff time.Duration
}

// Updater owns the tracker and the worker.
type Updater struct {
	o       Options
	tracker *dt.Tracker
	trigger chan struct{}

	mu       sync.Mutex
	inbound  map[string]InboundSpec
	ips      map[string]string // service → public IP address
	reported map[string]string // service → IP given to InboundReady
	// leftovers are resources of unregistered services still to delete: service → kind.
	leftovers map[string]dt.Kind
	// orphans are owned resources no gateway service accounts for (start-up): "type/name".
	orphans map[string]bool
	synced  bool
}

// New returns an updater; call Bootstrap, then Run.
func New(o Options) *Updater {
	if o.Parallel <= 0 {
		o.Parallel = 8
	}
	if o.Gather <= 0 {
		o.Gather = 100 * time.Millisecond
	}
	if o.MaxGather < o.Gather {
		o.MaxGather = max(time.Second, o.Gather)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 30 * time.Second
	}
	return &Updater{o: o, tracker: dt.New(), trigger: make(chan struct{}, 1), inbound: map[string]InboundSpec{},
		ips: map[string]string{}, reported: map[string]string{}, leftovers: map[string]dt.Kind{}, orphans: map[string]bool{}}
}

// Tracker is the updater's DiffTracker (read-only use: tests, status).
func (u *Updater) Tracker() *dt.Tracker { return u.tracker }

// Trigger asks for a pass; triggers sent while one is pending coalesce.
func (u *Updater) Trigger() {
	select {
	case u.trigger <- struct{}{}:
	default:
	}
}

// SetInbound sets a LoadBalancer Service: its resources' spec and its ready pod addresses
// (pod address → node address).
func (u *Updater) SetInbound(name string, spec InboundSpec, members map[string]string) {
	u.mu.Lock()
	u.inbound[name] = spec
	u.mu.Unlock()
	u.tracker.SetService(dt.Service{Name: name, Kind: dt.Inbound, Config: spec.Fingerprint()})
	u.tracker.SetMembers(name, members)
	u.Trigger()
}

// SetInboundMembers replaces the pod addresses of an inbound service SetInbound already set,
// keeping its spec: for a service whose spec cannot be built now (a named target port, and no
// ready endpoint to resolve it from) while its members are known. A service not set is left
// alone.
func (u *Updater) SetInboundMembers(name string, members map[string]string) {
	if _, known := u.tracker.Desired()[name]; !known {
		return
	}
	u.tracker.SetMembers(name, members)
	u.Trigger()
}

// DeleteInbound withdraws a service: addresses first, then registration and resources.
func (u *Updater) DeleteInbound(name string) {
	u.withdraw(name, dt.Inbound)
	u.Trigger()
}

// withdraw drops a service from the cluster side. One that never got registered may still
// have resources (written before a failed registration): they are deleted directly.
func (u *Updater) withdraw(name string, kind dt.Kind) {
	u.tracker.DeleteService(name)
	if _, registered := u.tracker.Applied()[name]; !registered {
		u.mu.Lock()
		u.leftovers[name] = kind
		u.mu.Unlock()
	}
}

// SetEgress sets the pods of an egress identity; with no pods the identity goes away.
func (u *Updater) SetEgress(identity string, members map[string]string) {
	if len(members) == 0 {
		if _, known := u.tracker.Desired()[identity]; known {
			u.withdraw(identity, dt.Outbound)
		}
	} else {
		u.tracker.SetService(dt.Service{Name: identity, Kind: dt.Outbound, Config: OutboundFingerprint})
		u.tracker.SetMembers(identity, members)
	}
	u.Trigger()
}

// Bootstrap rebuilds the Azure side from Azure: the gateway's services and address
// locations, and this cluster's resources (by tag). Resources no registration accounts for
// are orphans, deleted by the first pass unless the cluster wants them.
func (u *Updater) Bootstrap(ctx context.Context) error {
	a := u.o.Azure
	st, err := a.ReadGateway(ctx)
	if err != nil {
		return err
	}
	owned, err := a.ListOwned(ctx)
	if err != nil {
		return err
	}
	var svcs []dt.Service
	registered := map[string]bool{}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range st.Services {
		if s == nil || s.Name == nil {
			continue
		}
		name := *s.Name
		pip := owned.PIPs[PIPName(name)]
		ipv6 := pip != nil && pip.Properties != nil && deref(pip.Properties.PublicIPAddressVersion) == armnetwork.IPVersionIPv6
		if pip != nil && pip.Properties != nil && pip.Properties.IPAddress != nil {
			u.ips[name] = *pip.Properties.IPAddress
		}
		switch {
		case owned.LBs[name] != nil:
			svcs = append(svcs, dt.Service{Name: name, Kind: dt.Inbound, Config: SpecOfLB(owned.LBs[name], ipv6).Fingerprint()})
		case owned.NATs[name] != nil:
			svcs = append(svcs, dt.Service{Name: name, Kind: dt.Outbound, Config: OutboundFingerprint})
		default:
			continue // another cluster's (or a user's) service
		}
		registered[name] = true
	}
	u.tracker.LoadApplied(svcs, st.Locations)
	for n := range owned.LBs {
		if !registered[n] {
			u.orphans["lb/"+n] = true
		}
	}
	for n := range owned.NATs {
		if !registered[n] {
			u.orphans["nat/"+n] = true
		}
	}
	for n := range owned.PIPs {
		if !registered[strings.TrimSuffix(n, "-pip")] {
			u.orphans["pip/"+n] = true
		}
	}
	klog.InfoS("Service gateway state read", "services", len(svcs), "locations", len(st.Locations), "orphans", len(u.orphans))
	return nil
}

// Run is the worker: one pass per (coalesced) trigger, retried with exponential backoff until
// it succeeds.
func (u *Updater) Run(ctx context.Context) {
	backoff := u.o.MinBackoff
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-u.trigger:
		case <-retry.C:
		}
		// Let the burst gather: wait for a quiet gap of Gather, at most MaxGather in all;
		// triggers meanwhile coalesce into this pass.
		began := time.Now()
		for gathering := true; gathering; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(u.o.Gather):
			}
			select {
			case <-u.trigger:
				gathering = time.Since(began) < u.o.MaxGather
			default:
				gathering = false
			}
		}
		if err := u.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			klog.ErrorS(err, "Service gateway pass failed; retrying", "after", backoff)
			syncs.WithLabelValues("error").Inc()
			retry.Reset(backoff)
			backoff = min(2*backoff, u.o.MaxBackoff)
			continue
		}
		syncs.WithLabelValues("success").Inc()
		backoff = u.o.MinBackoff
	}
}

// Sync is one pass: register what is new, push the address diff, unregister what is drained,
// delete leftovers and orphans. Every successful call is recorded in the tracker; the error
// joins every failure of the pass.
func (u *Updater) Sync(ctx context.Context) error {
	var errs []error
	if err := u.register(ctx); err != nil {
		errs = append(errs, err)
	}
	if d := u.tracker.LocationsDiff(); !d.Empty() {
		pendingOps.WithLabelValues("locations").Set(float64(d.Addresses()))
		start := time.Now()
		err := u.o.Azure.UpdateAddressLocations(ctx, d)
		observeCall("update_address_locations", start, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("updateAddressLocations (%d locations): %w", len(d.Locations), err))
		} else {
			batchSize.WithLabelValues("update_address_locations").Observe(float64(d.Addresses()))
			u.tracker.RecordLocations(d)
			pendingOps.WithLabelValues("locations").Set(0)
			klog.V(2).InfoS("Service gateway address locations updated", "locations", len(d.Locations), "addresses", d.Addresses(), "full", d.Full)
		}
	}
	if err := u.unregister(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := u.deleteLeftovers(ctx); err != nil {
		errs = append(errs, err)
	}
	u.reportReady()
	u.mu.Lock()
	u.synced = len(errs) == 0
	u.mu.Unlock()
	return errors.Join(errs...)
}

// register writes the resources of every service to register (in parallel), then registers
// all that succeeded in one updateServices call.
func (u *Updater) register(ctx context.Context) error {
	todo := u.tracker.ToRegister()
	pendingOps.WithLabelValues("register").Set(float64(len(todo)))
	if len(todo) == 0 {
		return nil
	}
	applied := u.tracker.Applied()
	written := parallel.Do(ctx, u.o.Parallel, len(todo), func(ctx context.Context, i int) error {
		return u.writeResources(ctx, todo[i])
	})
	var errs []error
	var ok []dt.Service
	var reqs []*armnetwork.ServiceGatewayServiceRequest
	for i, s := range todo {
		if err := written[i]; err != nil {
			errs = append(errs, err)
			if u.o.Callbacks.Failed != nil {
				u.o.Callbacks.Failed(s.Name, s.Kind, err)
			}
			continue
		}
		ok = append(ok, s)
		if _, known := applied[s.Name]; !known { // a config change needs no new registration
			reqs = append(reqs, &armnetwork.ServiceGatewayServiceRequest{IsDelete: to.Ptr(false),
				Service: u.o.Azure.Scope.Registration(s.Name, s.Kind == dt.Outbound)})
		}
	}
	if len(reqs) > 0 {
		start := time.Now()
		err := u.o.Azure.UpdateServices(ctx, reqs)
		observeCall("update_services", start, err)
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("updateServices (register %d): %w", len(reqs), err))...)
		}
		batchSize.WithLabelValues("update_services").Observe(float64(len(reqs)))
	}
	u.tracker.RecordRegistered(ok...)
	return errors.Join(errs...)
}

func (u *Updater) writeResources(ctx context.Context, s dt.Service) error {
	u.mu.Lock()
	spec := u.inbound[s.Name]
	delete(u.leftovers, s.Name) // wanted again: rewritten, not deleted
	delete(u.orphans, "lb/"+s.Name)
	delete(u.orphans, "nat/"+s.Name)
	delete(u.orphans, "pip/"+PIPName(s.Name))
	u.mu.Unlock()
	start := time.Now()
	ip, err := u.o.Azure.EnsurePIP(ctx, s.Name, string(s.Kind), s.Kind == dt.Inbound && spec.IPv6)
	observeCall("put_public_ip", start, err)
	if err != nil {
		return err
	}
	u.mu.Lock()
	u.ips[s.Name] = ip
	u.mu.Unlock()
	start = time.Now()
	if s.Kind == dt.Outbound {
		err = u.o.Azure.EnsureNAT(ctx, s.Name)
		observeCall("put_nat_gateway", start, err)
		return err
	}
	err = u.o.Azure.EnsureLB(ctx, s.Name, spec)
	observeCall("put_load_balancer", start, err)
	return err
}

// unregister removes every drained service from the gateway in one call; their resources
// become leftovers to delete.
func (u *Updater) unregister(ctx context.Context) error {
	todo := u.tracker.ToRemove()
	pendingOps.WithLabelValues("unregister").Set(float64(len(todo)))
	if len(todo) == 0 {
		return nil
	}
	reqs := make([]*armnetwork.ServiceGatewayServiceRequest, 0, len(todo))
	names := make([]string, 0, len(todo))
	for _, s := range todo {
		reqs = append(reqs, &armnetwork.ServiceGatewayServiceRequest{IsDelete: to.Ptr(true), Service: &armnetwork.ServiceGatewayService{Name: to.Ptr(s.Name)}})
		names = append(names, s.Name)
	}
	start := time.Now()
	err := u.o.Azure.UpdateServices(ctx, reqs)
	observeCall("update_services", start, err)
	if err != nil {
		if strings.Contains(err.Error(), "ServiceWithOverlayMappingsCannotBeDeleted") {
			// Azure still maps addresses to it that the tracker does not know: resend every
			// location in full, then unregister.
			u.tracker.MarkDrift()
		}
		return fmt.Errorf("updateServices (unregister %d): %w", len(reqs), err)
	}
	batchSize.WithLabelValues("update_services").Observe(float64(len(reqs)))
	u.tracker.RecordRemoved(names...)
	u.mu.Lock()
	for _, s := range todo {
		u.leftovers[s.Name] = s.Kind
	}
	u.mu.Unlock()
	return nil
}

// deleteLeftovers deletes the resources of unregistered services (load balancer or NAT
// gateway first: they reference the public IP) and the orphans of start-up, in parallel.
func (u *Updater) deleteLeftovers(ctx context.Context) error {
	desired := u.tracker.Desired()
	u.mu.Lock()
	type job struct {
		name string
		kind dt.Kind
		keys []string // "type/name", deleted in order
	}
	var jobs []job
	for n, k := range u.leftovers {
		first := "lb/" + n
		if k == dt.Outbound {
			first = "nat/" + n
		}
		jobs = append(jobs, job{name: n, kind: k, keys: []string{first, "pip/" + PIPName(n)}})
	}
	// Orphans by stem: the load balancer or NAT gateway before the public IP it references.
	byStem := map[string][]string{}
	for key := range u.orphans {
		_, name, _ := strings.Cut(key, "/")
		stem := strings.TrimSuffix(name, "-pip")
		if _, want := desired[stem]; want || stem == ReservedEgress {
			delete(u.orphans, key)
			continue
		}
		byStem[stem] = append(byStem[stem], key)
	}
	for _, keys := range byStem {
		sort.Slice(keys, func(i, j int) bool { return !strings.HasPrefix(keys[i], "pip/") && strings.HasPrefix(keys[j], "pip/") })
		jobs = append(jobs, job{keys: keys})
	}
	u.mu.Unlock()
	pendingOps.WithLabelValues("delete").Set(float64(len(jobs)))
	if len(jobs) == 0 {
		return nil
	}
	errs := parallel.Do(ctx, u.o.Parallel, len(jobs), func(ctx context.Context, i int) error {
		j := jobs[i]
		for _, key := range j.keys {
			typ, name, _ := strings.Cut(key, "/")
			start := time.Now()
			err := u.o.Azure.Delete(ctx, typ, name)
			disowned := errors.Is(err, ErrNoLongerOwned)
			if disowned {
				err = nil
			}
			observeCall("delete_"+typ, start, err)
			if err != nil {
				return err
			}
			u.mu.Lock()
			delete(u.orphans, key)
			u.mu.Unlock()
			if disowned {
				// Someone took it over; what it references (its public IP) stays with it.
				klog.InfoS("Service gateway resource is no longer this cluster's: it and the rest of its service's resources are left alone", "resource", key, "rest", j.keys)
				u.mu.Lock()
				for _, rest := range j.keys {
					delete(u.orphans, rest)
				}
				u.mu.Unlock()
				break
			}
		}
		if j.name == "" {
			return nil
		}
		u.mu.Lock()
		delete(u.leftovers, j.name)
		delete(u.ips, j.name)
		delete(u.reported, j.name)
		u.mu.Unlock()
		if u.o.Callbacks.Removed != nil {
			u.o.Callbacks.Removed(j.name, j.kind)
		}
		return nil
	})
	return errors.Join(errs...)
}

// reportReady tells the controller the public IP of every registered inbound service it has
// not been told about (or whose IP changed).
func (u *Updater) reportReady() {
	if u.o.Callbacks.InboundReady == nil {
		return
	}
	applied, desired := u.tracker.Applied(), u.tracker.Desired()
	type ready struct{ name, ip string }
	var out []ready
	u.mu.Lock()
	for n, s := range applied {
		if s.Kind != dt.Inbound {
			continue
		}
		if d, ok := desired[n]; !ok || d != s {
			continue
		}
		if ip := u.ips[n]; ip != "" && u.reported[n] != ip {
			u.reported[n] = ip
			out = append(out, ready{n, ip})
		}
	}
	u.mu.Unlock()
	for _, r := range out {
		u.o.Callbacks.InboundReady(r.name, r.ip)
	}
}

// Resend forgets which IPs were reported, so the next pass reports them all again (the
// controller lost a status patch).
func (u *Updater) Resend(name string) {
	u.mu.Lock()
	delete(u.reported, name)
	u.mu.Unlock()
	u.Trigger()
}

// InSync reports whether the last pass succeeded and nothing is pending.
func (u *Updater) InSync() bool {
	u.mu.Lock()
	ok := u.synced && len(u.leftovers) == 0 && len(u.orphans) == 0
	u.mu.Unlock()
	return ok && u.tracker.InSync()
}
