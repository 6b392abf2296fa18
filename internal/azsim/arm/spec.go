package arm

import (
	"net/http"
	"regexp"
)

// ETagStyle selects how a resource type renders its etag.
type ETagStyle int

const (
	// ETagWeakGUID is Microsoft.Network's W/"<guid>", regenerated on every change.
	ETagWeakGUID ETagStyle = iota
	// ETagCounter is Microsoft.Compute's quoted counter "1", "2", ...
	ETagCounter
	// ETagNone: the type has no etag (resource groups).
	ETagNone
)

// PutMode selects how a PUT on an existing resource combines with the stored document.
type PutMode int

const (
	// PutReplace: the body replaces the resource (Microsoft.Network).
	PutReplace PutMode = iota
	// PutMerge: the body is deep-merged into the stored document (objects merged,
	// arrays replaced), as CRP behaves for the partial VMSS / VMSS VM bodies the CCM sends.
	PutMerge
)

// PatchMode selects PATCH semantics.
type PatchMode int

const (
	// PatchTags: PATCH only updates tags, synchronously, 200 (network UpdateTags).
	PatchTags PatchMode = iota
	// PatchMerge: PATCH deep-merges the body and runs as an LRO with 200 (compute Update).
	PatchMerge
	// PatchUnsupported: PATCH answers 405.
	PatchUnsupported
)

// LROStyle selects which polling headers a write returns.
type LROStyle int

const (
	// LROAsync: Azure-AsyncOperation (and, on DELETE, Location as well) — NRP/CRP behaviour.
	LROAsync LROStyle = iota
	// LROLocation: only a Location header (resource group DELETE).
	LROLocation
	// LRONone: the write is synchronous, no polling headers.
	LRONone
)

// PollingStyle selects the shape of the polling URLs a type's operations return.
type PollingStyle int

const (
	// PollingNRP: Azure-AsyncOperation …/locations/{l}/operations/{id} and, on DELETE,
	// Location …/locations/{l}/operationResults/{id} (Microsoft.Network).
	PollingNRP PollingStyle = iota
	// PollingCRP: Azure-AsyncOperation …/locations/{l}/operations/{id}?p={guid} and, on DELETE
	// and actions, Location …/operations/{id}?monitor=true&p={guid} (Microsoft.Compute).
	PollingCRP
	// PollingCRPDisks: as PollingCRP under …/locations/{l}/DiskOperations/{id}, with the
	// Location header on every write (disks and snapshots).
	PollingCRPDisks
)

// Write is what a TypeSpec.Prepare hook sees: the new document about to be
// stored (mutable) and the previous one (nil on create; do not modify).
type Write struct {
	ID      ResourceID     // canonical ID of the resource being written (the parent for child writes)
	Doc     map[string]any // new document; Prepare validates it and fills server-side fields
	Old     map[string]any // stored document before the write, nil on create
	Method  string         // PUT, PATCH, DELETE (child delete), POST (action)
	Request *http.Request  // the HTTP request (nil for Tx-internal writes)
	// Child is set when the write comes from a child API (PUT/DELETE of
	// .../subnets/x): the child's canonical ID.
	Child *ResourceID
}

// IsCreate reports whether the write creates the resource.
func (w *Write) IsCreate() bool { return w.Old == nil }

// Action is a POST (or GET) on a sub-path of a resource that is not a child
// collection, e.g. serviceGateways/{n}/updateServices or .../instanceView.
type Action struct {
	Methods []string // allowed methods, default POST
	// Handle runs under the engine lock. The returned status and body (any
	// JSON-marshallable value, nil for no body) are sent as is; the engine adds
	// the standard headers. Writes done through tx trigger the derivers.
	Handle func(tx *Tx, id ResourceID, r *ActionRequest) (status int, body any, err error)
}

// ActionRequest carries the decoded request of an action.
type ActionRequest struct {
	Method  string
	Body    map[string]any // nil when the request had no body
	Request *http.Request
	// Header is the response header (for Location / Azure-AsyncOperation).
	Header http.Header
	// AsyncOperation registers an LRO for the resource and returns the
	// Azure-AsyncOperation and Location URLs, for actions that answer 202.
	AsyncOperation func() (asyncURL, locationURL string)
}

// TypeSpec describes one resource type to the engine. Zero values pick the
// Microsoft.Network defaults.
type TypeSpec struct {
	// Type is the canonical full type, e.g. "Microsoft.Network/loadBalancers" or
	// "Microsoft.Network/loadBalancers/backendAddressPools". Its segments give
	// the casing of IDs and "type" fields.
	Type string
	// APIVersions accepted for the type. Child types without a list inherit the parent's.
	APIVersions []string

	ETag  ETagStyle
	Put   PutMode
	Patch PatchMode
	// KeepETag, when set, tells whether a PUT or PATCH that turns old into doc keeps the
	// stored etag (docs as stored, provisioningState and etag left out): CRP renews a scale
	// set's etag only when its model changes, and a scale set instance's only when more than
	// its tags change. Nil renews the etag on every write.
	KeepETag func(old, doc map[string]any) bool
	// RenewETagWhenCreated: the end of a create operation renews the etag once more (CRP
	// virtual machines answer the PUT with "1" and read "2" once created).
	RenewETagWhenCreated bool
	// Polling selects the polling URL shape (default PollingNRP).
	Polling PollingStyle
	// UpdatePollsResource: a PUT that updates an existing resource answers without polling
	// headers, and the client polls the resource until its provisioningState ends (CRP
	// virtual machines). Creates still return Azure-AsyncOperation.
	UpdatePollsResource bool

	// CreateStatus / UpdateStatus are the PUT status codes (default 201 / 200).
	CreateStatus, UpdateStatus int
	// PutLRO / DeleteLRO select polling headers (default LROAsync). A child
	// type with PutLRO LRONone answers its PUTs synchronously (e.g. approving
	// a private endpoint connection), whatever the parent's style.
	PutLRO, DeleteLRO LROStyle
	// DeleteStatus is the DELETE status for an existing resource (default 202;
	// 200 for synchronous deletes).
	DeleteStatus int
	// CreatingState is the provisioningState shown while a create LRO runs
	// (default "Updating", as NRP; CRP uses "Creating").
	CreatingState string
	// NoLocation: the type has no location field (location not required).
	NoLocation bool
	// OperationStatusExtras: add name/startTime/endTime to the status body (CRP style).
	OperationStatusExtras bool

	// NamePattern validates names (default: NRP's rule, 1-80 characters).
	NamePattern *regexp.Regexp
	// NameMaxLen overrides the maximum name length (default 80).
	NameMaxLen int

	// Prepare validates and normalises a write before it is stored. Return an
	// *Error for ARM errors. For a parent type it also sees child API writes
	// (w.Child set) since children live inside the parent document.
	Prepare func(tx *Tx, w *Write) error
	// BeforeDelete can veto a delete (e.g. PublicIPAddressInUse).
	BeforeDelete func(tx *Tx, id ResourceID, doc map[string]any) error
	// AfterDelete runs after the resource was removed from the store.
	AfterDelete func(tx *Tx, id ResourceID, doc map[string]any)

	// ChildField, for child types, is the array under the parent's "properties"
	// that holds the children (default: the last type segment).
	ChildField string

	// Actions keyed by the lower-cased sub-path segment (e.g. "updateservices").
	Actions map[string]Action

	// NoAPI, for child types, fills the child array's id, type, etag and
	// provisioningState like any child but gives the type no API of its own
	// (requests answer as for an unregistered type): read-only sub-resources
	// such as a private link service's ipConfigurations.
	NoAPI bool

	// VirtualGet / VirtualList serve a type that has no storage of its own
	// (e.g. VMSS VM network interface views computed from the VMSS VM).
	VirtualGet  func(tx *Tx, id ResourceID) (map[string]any, error)
	VirtualList func(tx *Tx, collection ResourceID) ([]map[string]any, error)
}

// Defaults used when a spec leaves fields zero.
var defaultNamePattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9_])?$`)

func (s *TypeSpec) createStatus() int {
	if s.CreateStatus == 0 {
		return http.StatusCreated
	}
	return s.CreateStatus
}

func (s *TypeSpec) updateStatus() int {
	if s.UpdateStatus == 0 {
		return http.StatusOK
	}
	return s.UpdateStatus
}

func (s *TypeSpec) deleteStatus() int {
	if s.DeleteStatus == 0 {
		return http.StatusAccepted
	}
	return s.DeleteStatus
}

func (s *TypeSpec) creatingState() string {
	if s.CreatingState == "" {
		return "Updating"
	}
	return s.CreatingState
}

func (s *TypeSpec) validName(name string) bool {
	maxLen := s.NameMaxLen
	if maxLen == 0 {
		maxLen = 80
	}
	if len(name) == 0 || len(name) > maxLen {
		return false
	}
	p := s.NamePattern
	if p == nil {
		p = defaultNamePattern
	}
	return p.MatchString(name)
}
