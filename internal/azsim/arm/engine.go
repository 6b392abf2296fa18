package arm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Config configures an Engine. All fields are optional.
type Config struct {
	// BaseURL returns the externally visible base URL of the server
	// (e.g. "https://127.0.0.1:8443"); used for nextLink and polling URLs.
	// Default: derived from the request (scheme from TLS, Host header).
	BaseURL func() string
	// LRODuration is how long PUT/DELETE operations stay in progress. 0 means
	// they complete at once (still answered as LROs with polling headers).
	LRODuration time.Duration
	// PollRetryAfter, if > 0, is sent as retry-after-ms on in-progress
	// operation responses so clients poll fast in tests. Default: none.
	PollRetryAfter time.Duration
	// PageSize is the maximum number of items per list page (default 100).
	PageSize int
	// Authorize validates the request's credentials; a non-nil error answers
	// 401. Default: any non-empty "Authorization: Bearer <token>".
	Authorize func(*http.Request) error
	// MaxBodyBytes limits request bodies (default 4 MiB; larger → 413).
	MaxBodyBytes int64
	// Now is the clock (default time.Now); tests can drive LRO completion.
	Now func() time.Time
	// ServiceGatewayActionStatus is the status of serviceGateways POST actions:
	// 200 (NRP-faithful, default) or 202 (swagger-faithful). Read by the network package.
	ServiceGatewayActionStatus int
}

// DeriveFunc recomputes derived (read-only) fields after writes. It runs under
// the engine lock at the end of every transaction that changed something, with
// the keys that changed. It should use tx.Update so that etags move only when a
// document really changes.
type DeriveFunc func(tx *Tx, changed []string)

// Engine is the in-memory ARM: routing, store, etags, LROs, paging, errors.
type Engine struct {
	cfg Config

	mu         sync.Mutex
	specs      map[string]*TypeSpec   // lower-cased full type → spec
	namespaces map[string]bool        // lower-cased namespaces with registered types
	childrenOf map[string][]*TypeSpec // lower-cased parent type → child specs
	derivers   []DeriveFunc
	routes     []route

	res map[string]*resource // lower-cased ID → resource
	// byType indexes res by lower-cased type; sortedKeys caches each type's
	// keys in order (dropped when a resource of the type is added or removed),
	// so that lists and derivers do not scan and sort every resource.
	byType     map[string]map[string]*resource
	sortedKeys map[string][]string
	ipam       *ipam
	ops        map[string]*operation
	opSeq      []string // operation IDs in creation order (pruning)
	fails      []failRule
}

type route struct {
	match func(*http.Request) bool
	h     http.Handler
}

// NewEngine creates an engine with no resource types; register them with
// Register (the network package's Register(e) adds Microsoft.Network and
// resource groups).
func NewEngine(cfg Config) *Engine {
	if cfg.PageSize <= 0 {
		cfg.PageSize = 100
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Authorize == nil {
		cfg.Authorize = DefaultAuthorize
	}
	if cfg.ServiceGatewayActionStatus == 0 {
		cfg.ServiceGatewayActionStatus = http.StatusOK
	}
	return &Engine{
		cfg:        cfg,
		specs:      map[string]*TypeSpec{},
		namespaces: map[string]bool{},
		childrenOf: map[string][]*TypeSpec{},
		res:        map[string]*resource{},
		byType:     map[string]map[string]*resource{},
		sortedKeys: map[string][]string{},
		ipam:       newIPAM(),
		ops:        map[string]*operation{},
	}
}

// Config returns the engine configuration (after defaults).
func (e *Engine) Config() Config { return e.cfg }

// DefaultAuthorize accepts any non-empty bearer token.
func DefaultAuthorize(r *http.Request) error {
	h := r.Header.Get("Authorization")
	if len(h) < 7 || !strings.EqualFold(h[:7], "Bearer ") || strings.TrimSpace(h[7:]) == "" {
		return errors.New("the 'Authorization' header is missing or is not a bearer token")
	}
	return nil
}

// Register adds resource types. Child types (more than one type segment) must
// be registered after their parent.
func (e *Engine) Register(specs ...TypeSpec) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range specs {
		s := specs[i]
		if len(strings.Split(s.Type, "/")) < 2 {
			panic(fmt.Sprintf("arm: bad type %q", s.Type))
		}
		lt := strings.ToLower(s.Type)
		parentType := lt[:strings.LastIndex(lt, "/")]
		if p := e.specs[parentType]; p != nil && strings.Count(lt, "/") > 1 {
			if s.ChildField == "" && s.VirtualGet == nil && s.VirtualList == nil {
				s.ChildField = s.Type[strings.LastIndex(s.Type, "/")+1:]
			}
			if len(s.APIVersions) == 0 {
				s.APIVersions = p.APIVersions
			}
			if s.ETag == ETagWeakGUID {
				s.ETag = p.ETag
			}
			if s.ChildField != "" {
				e.childrenOf[parentType] = append(e.childrenOf[parentType], &s)
			}
		}
		e.specs[lt] = &s
		e.namespaces[strings.ToLower(s.Type[:strings.Index(s.Type, "/")])] = true
	}
}

// AddDeriver registers a function that recomputes derived fields after writes
// (back-references, pool memberships, …). Derivers run in registration order.
func (e *Engine) AddDeriver(fn DeriveFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.derivers = append(e.derivers, fn)
}

// AddRoute serves requests for which match returns true with h (after
// authentication, before ARM routing). For endpoints that are not resources,
// e.g. GET /subscriptions/{s}/providers. h can use Engine.Do for state.
func (e *Engine) AddRoute(match func(*http.Request) bool, h http.Handler) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.routes = append(e.routes, route{match, h})
}

func (e *Engine) spec(fullType string) *TypeSpec { return e.specs[strings.ToLower(fullType)] }

// CanonicalType spells a full resource type ("microsoft.Compute/virtualMachineScaleSets/…",
// "Microsoft.Network/locations/operations") as registered: the type's own spelling when it is
// registered, else at least the namespace's. Clients spell types in any case; counters and
// metrics keyed by type use this so that one type is one row.
func (e *Engine) CanonicalType(t string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s := e.specs[strings.ToLower(t)]; s != nil {
		return s.Type
	}
	ns, rest, ok := strings.Cut(t, "/")
	for _, s := range e.specs {
		if sns, _, _ := strings.Cut(s.Type, "/"); strings.EqualFold(sns, ns) {
			if ok {
				return sns + "/" + rest
			}
			return sns
		}
	}
	return t
}

func (e *Engine) now() time.Time { return e.cfg.Now() }

// Do runs fn under the engine lock as one transaction; derivers run afterwards
// if fn changed anything. Use it from other packages (control API, compute
// helpers) to read or change state without HTTP.
func (e *Engine) Do(fn func(tx *Tx) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance()
	tx := e.newTx(nil)
	err := fn(tx)
	e.commit(tx)
	return err
}

func (e *Engine) newTx(r *http.Request) *Tx {
	return &Tx{e: e, changed: map[string]bool{}, req: r}
}

// commit runs the derivers if the transaction changed anything.
func (e *Engine) commit(tx *Tx) {
	if len(tx.changed) == 0 {
		return
	}
	keys := make([]string, 0, len(tx.changed))
	for k := range tx.changed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, d := range e.derivers {
		d(tx, keys)
	}
}

// GetResource returns the JSON of a stored resource or child (any casing).
func (e *Engine) GetResource(id string) ([]byte, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance()
	tx := e.newTx(nil)
	doc, ok := tx.Get(id)
	if !ok {
		doc, ok = tx.GetChild(id)
	}
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(publicDoc(doc))
	return b, err == nil
}

// ListResources returns the JSON of all stored resources of a full type
// (case-insensitive, e.g. "Microsoft.Network/loadBalancers"), sorted by ID.
func (e *Engine) ListResources(resourceType string) [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance()
	var out [][]byte
	for _, r := range e.sorted(resourceType, "") {
		if b, err := json.Marshal(publicDoc(r.Doc)); err == nil {
			out = append(out, b)
		}
	}
	return out
}

// snapshot is the persisted form of the state.
type snapshot struct {
	Resources []snapResource `json:"resources"`
	IPAM      *ipam          `json:"ipam"`
}

type snapResource struct {
	ID      string         `json:"id"`
	Counter int64          `json:"counter,omitempty"`
	Doc     map[string]any `json:"doc"`
}

// Snapshot serialises all resources and IP reservations. In-flight operations
// are not kept: restored resources keep whatever provisioningState they had.
func (e *Engine) Snapshot() ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.advance()
	s := snapshot{IPAM: e.ipam}
	for _, r := range e.sorted("", "") {
		s.Resources = append(s.Resources, snapResource{ID: r.ID.String(), Counter: r.Counter, Doc: r.Doc})
	}
	return json.Marshal(s)
}

// Restore replaces the state with a snapshot taken by Snapshot.
func (e *Engine) Restore(b []byte) error {
	var s snapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	res := map[string]*resource{}
	for _, sr := range s.Resources {
		id, err := ParseID(sr.ID)
		if err != nil {
			return fmt.Errorf("snapshot resource %q: %w", sr.ID, err)
		}
		spec := e.spec(id.FullType())
		if spec == nil {
			return fmt.Errorf("snapshot resource %q: type not registered", sr.ID)
		}
		doc, err := FromModel(sr.Doc) // re-decode with UseNumber
		if err != nil {
			return err
		}
		r := newResource(id, spec, doc)
		r.Counter = sr.Counter
		res[r.key] = r
	}
	if s.IPAM == nil || s.IPAM.Spaces == nil {
		s.IPAM = newIPAM()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.res, e.ipam = res, s.IPAM
	e.reindex()
	e.ops, e.opSeq = map[string]*operation{}, nil
	return nil
}

// Reset drops all state (resources, reservations, operations, pending failure rules).
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.res = map[string]*resource{}
	e.reindex()
	e.ipam = newIPAM()
	e.ops, e.opSeq, e.fails = map[string]*operation{}, nil, nil
}

// readBody reads a request body within the size limit and decodes it.
func (e *Engine) readBody(r *http.Request) (map[string]any, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, e.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, BadRequest("InvalidRequestContent", "The request content could not be read: %v", err)
	}
	if int64(len(b)) > e.cfg.MaxBodyBytes {
		return nil, Errorf(http.StatusRequestEntityTooLarge, "RequestContentTooLarge",
			"The request content size exceeds the maximum of %d bytes.", e.cfg.MaxBodyBytes)
	}
	// An empty body or JSON null (what many clients send for actions) means "no body".
	if t := strings.TrimSpace(string(b)); t == "" || t == "null" {
		return nil, nil
	}
	return decodeRequest(b)
}

// decodeRequest decodes a request body into a document, mapping every failure
// to ARM's InvalidRequestContent. It is the fuzz target.
func decodeRequest(b []byte) (map[string]any, error) {
	doc, err := DecodeDoc(b)
	if err != nil {
		return nil, BadRequest("InvalidRequestContent",
			"The request content was invalid and could not be deserialized: '%v'.", err)
	}
	return doc, nil
}
