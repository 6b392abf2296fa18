// Package dryrun builds a writer set that writes nothing: its stores read Azure through the
// process's real writers (their caches) and record every PUT and DELETE the planners ask for,
// with what it would change, instead of sending it. The drift audit runs a service's
// reconcile on it to find out whether Azure drifted (a recorded write is a difference), and
// the plan command runs every reconcile on it to print what the CCM would write.
//
// A recorded write also becomes the resource's planned state: later reads through the set see
// it, so the reconciles of several services on one load balancer add up as their writes would
// (the plan shows one load balancer with every service's frontend, not each alone). Creations
// get what Azure would fill in (resource IDs, and placeholder addresses from reserved ranges for
// new public IPs and dynamic private frontends, see Recorder.Placeholder), so a reconcile gets
// as far on the dry-run set as on Azure.
package dryrun

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/writer"
)

// Op is what a recorded write does to its resource.
type Op string

const (
	// Create: a PUT of a resource that does not exist.
	Create Op = "create"
	// Update: a PUT of an existing resource (or of one of its backend pools, see Write.Child).
	Update Op = "update"
	// Delete: a DELETE.
	Delete Op = "delete"
)

// Write is one ARM write the planners asked for.
type Write struct {
	// ResourceType is the ARM type, e.g. "Microsoft.Network/loadBalancers".
	ResourceType string
	ID           string
	Op           Op
	// Child is the backend pool of a pool-only write (sent with the pool's own API), else "".
	Child string
	// Actor is who asked for it (Recorder.SetActor when the write was recorded), e.g.
	// "service default/web".
	Actor string
	// Changes are the differences from the resource as it was before the write (nil for a
	// deletion).
	Changes []changes.Change
	// Removes are what a deletion takes with it (nil for other writes).
	Removes []Dependent
}

// Dependent is something a deletion takes with its resource that someone else relies on: a
// private link service's private endpoint connections go with it, and their consumers' private
// endpoints are cut off. A plan names each, so the operator sees it before it happens.
type Dependent struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Target is what it connects: a private endpoint's ID.
	Target string `json:"target,omitempty"`
	// State is its state as Azure reports it, e.g. Approved or Pending.
	State string `json:"state,omitempty"`
}

// Name is the resource's name (the last segment of its ID).
func (w Write) Name() string { return w.ID[strings.LastIndex(w.ID, "/")+1:] }

// Event is an event the planners recorded on an object (an invalid annotation, a placement
// decision) while the dry run went on; the set's user decides what to do with it.
type Event struct {
	Actor, Kind, Namespace, Name string
	Type, Reason, Message        string
}

// planned is a resource's state after the recorded writes: obj is a *T, nil when deleted.
type planned struct {
	obj any
}

// Recorder collects the writes of one dry run and holds the resources' planned states. It is
// safe for concurrent use; Actor attribution assumes one reconcile at a time.
type Recorder struct {
	mu     sync.Mutex
	actor  string
	writes []Write
	events []Event
	state  map[string]planned
	// listEdits are the edits made to a cached list, by list kind and resource group
	// (lower-cased); each is a func([]T) []T of that list's element type.
	listEdits map[string][]any
	// addrs describes the placeholder addresses handed out.
	addrs        map[netip.Addr]string
	next4, next6 netip.Addr
}

// Placeholder ranges: 240.0.0.0/4 (reserved, never assigned) and 100::/64 (discard-only, RFC
// 6666). Nothing in Azure carries them, so a plan can show them as what they stand for.
var (
	firstIPv4 = netip.MustParseAddr("240.0.0.1")
	firstIPv6 = netip.MustParseAddr("100::1")
)

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	r := &Recorder{}
	r.Reset()
	return r
}

// Reset forgets every write, event and planned state (a new dry run on the same set).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes, r.events = nil, nil
	r.state = map[string]planned{}
	r.listEdits = map[string][]any{}
	r.addrs = map[netip.Addr]string{}
	r.next4, r.next6 = firstIPv4, firstIPv6
}

// SetActor names who the writes recorded from now on are for.
func (r *Recorder) SetActor(actor string) {
	r.mu.Lock()
	r.actor = actor
	r.mu.Unlock()
}

// Writes returns the recorded writes in the order they were made.
func (r *Recorder) Writes() []Write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

// Events returns the recorded events.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Placeholder describes a placeholder address handed out to a created resource ("address
// of new public IP x"); ok is false for any other string.
func (r *Recorder) Placeholder(s string) (string, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.addrs[a]
	return d, ok
}

// placeholder hands out the next placeholder address of the family.
func (r *Recorder) placeholder(v6 bool, what string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.next4
	if v6 {
		a = r.next6
		r.next6 = r.next6.Next()
	} else {
		r.next4 = r.next4.Next()
	}
	r.addrs[a] = what
	return a.String()
}

func (r *Recorder) planned(id string) (planned, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.state[strings.ToLower(id)]
	return p, ok
}

// record adds a write of after (nil: a deletion) over before. fill, when set, completes after
// with what Azure would add once the difference is taken (IDs of new children are not news).
func (r *Recorder) record(typ, id string, op Op, child string, before, after any, fill func()) error {
	// Fill first: what Azure would set (IDs, a new public IP's address) is part of the change,
	// so a plan shows the placeholder address where the write would put the real one.
	if fill != nil {
		fill()
	}
	var cs []changes.Change
	if op != Delete {
		var err error
		if cs, err = changes.Diff(before, after); err != nil {
			return fmt.Errorf("dry run: comparing %s: %w", id, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, Write{ResourceType: typ, ID: id, Op: op, Child: child, Actor: r.actor, Changes: cs})
	r.state[strings.ToLower(id)] = planned{obj: after}
	return nil
}

// setRemoves attaches what the last recorded write, a deletion, takes with it.
func (r *Recorder) setRemoves(ds []Dependent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes[len(r.writes)-1].Removes = ds
}

// EventRecorder returns a record.EventRecorder that keeps events in the recorder instead of
// sending them (Events).
func (r *Recorder) EventRecorder() *EventRecorder { return &EventRecorder{r: r} }

// EventRecorder collects events into a Recorder (it implements record.EventRecorder).
type EventRecorder struct{ r *Recorder }

// Event implements record.EventRecorder.
func (e *EventRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	ev := Event{Type: eventtype, Reason: reason, Message: message}
	if obj != nil {
		ev.Kind = obj.GetObjectKind().GroupVersionKind().Kind
		if m, err := meta.Accessor(obj); err == nil {
			ev.Namespace, ev.Name = m.GetNamespace(), m.GetName()
		}
		if ev.Kind == "" {
			ev.Kind = kindOf(obj)
		}
	}
	e.r.mu.Lock()
	ev.Actor = e.r.actor
	e.r.events = append(e.r.events, ev)
	e.r.mu.Unlock()
}

// Eventf implements record.EventRecorder.
func (e *EventRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	e.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (e *EventRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	e.Eventf(obj, eventtype, reason, messageFmt, args...)
}

// kindOf names an object's Go type when its TypeMeta is empty (typed clients leave it so).
func kindOf(obj runtime.Object) string {
	s := fmt.Sprintf("%T", obj)
	return s[strings.LastIndex(s, ".")+1:]
}

// Discard is a record.EventRecorder that drops everything (a dry run whose events nobody reads).
type Discard struct{}

// Event implements record.EventRecorder.
func (Discard) Event(runtime.Object, string, string, string) {}

// Eventf implements record.EventRecorder.
func (Discard) Eventf(runtime.Object, string, string, string, ...any) {}

// AnnotatedEventf implements record.EventRecorder.
func (Discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {}

// store is a writer.Store that reads the planned state, else Azure through the real writer,
// and records writes.
type store[T any] struct {
	typ, id string
	real    *writer.Writer[T]
	rec     *Recorder
	// fill sets what Azure would set on a written model (IDs, addresses).
	fill func(r *Recorder, id string, obj *T)
	// dependents lists what a deletion of the model takes with it (nil: nothing).
	dependents func(obj *T) []Dependent
}

func (s *store[T]) current(ctx context.Context) (*T, error) {
	if p, ok := s.rec.planned(s.id); ok {
		if p.obj == nil {
			return nil, nil
		}
		return p.obj.(*T), nil
	}
	return s.real.Peek(ctx)
}

// Get implements writer.Store. The model may be shared: the writer copies it before applying
// mutations.
func (s *store[T]) Get(ctx context.Context) (*T, string, error) {
	obj, err := s.current(ctx)
	if err != nil || obj == nil {
		return nil, "", err
	}
	return obj, "dry-run", nil
}

// Put implements writer.Store: records the write instead of sending it.
func (s *store[T]) Put(ctx context.Context, obj *T, _ string) (*T, string, error) {
	before, err := s.current(ctx)
	if err != nil {
		return nil, "", err
	}
	op := Update
	if before == nil {
		op = Create
	}
	planned := writer.DeepCopy(obj)
	fill := func() {
		if s.fill != nil {
			s.fill(s.rec, s.id, planned)
		}
	}
	if err := s.rec.record(s.typ, s.id, op, "", before, planned, fill); err != nil {
		return nil, "", err
	}
	// The caller gets the model as Azure would answer it.
	return writer.DeepCopy(planned), "dry-run", nil
}

// Delete implements writer.Store.
func (s *store[T]) Delete(ctx context.Context, _ string) error {
	before, err := s.current(ctx)
	if err != nil || before == nil {
		return err
	}
	if err := s.rec.record(s.typ, s.id, Delete, "", before, nil, nil); err != nil {
		return err
	}
	if s.dependents != nil {
		s.rec.setRemoves(s.dependents(before))
	}
	return nil
}
