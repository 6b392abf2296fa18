package arm

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// listPage is the ARM list body.
type listPage struct {
	Value    []any  `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

// serveList answers a collection GET: top-level types per resource group or
// subscription, child collections from the parent document, virtual lists.
func (e *Engine) serveList(tx *Tx, w http.ResponseWriter, r *http.Request, spec *TypeSpec, id ResourceID) error {
	var items []map[string]any
	switch {
	case spec.VirtualList != nil:
		docs, err := spec.VirtualList(tx, id)
		if err != nil {
			return err
		}
		items = docs
	case spec.ChildField != "":
		pid, _ := id.Parent()
		parent := e.res[pid.Key()]
		if parent == nil {
			if err := e.requireGroup(pid); err != nil {
				return err
			}
			return NotFoundTopLevel(pid)
		}
		items = Arr(parent.Doc, "properties", spec.ChildField)
	default:
		if id.Namespace != ResourceGroupsNamespace {
			if err := e.requireGroup(id); err != nil {
				return err
			}
		}
		scope := id.Scope()
		for _, res := range e.sorted(spec.Type, scope) {
			items = append(items, res.Doc)
		}
	}
	// Stored resources come sorted by key (the lower-cased ID) from the type index.
	if spec.VirtualList != nil || spec.ChildField != "" {
		sort.SliceStable(items, func(i, j int) bool {
			return strings.ToLower(Str(items[i], "id")) < strings.ToLower(Str(items[j], "id"))
		})
	}
	// $skipToken is the lower-cased ID of the last item of the previous page,
	// so pages stay correct when items are added or removed between calls.
	start := 0
	if tok := r.URL.Query().Get("$skipToken"); tok != "" {
		last, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return BadRequest("InvalidSkipToken", "The $skipToken '%s' is invalid.", tok)
		}
		start = sort.Search(len(items), func(i int) bool { return strings.ToLower(Str(items[i], "id")) > string(last) })
	}
	end := start + e.cfg.PageSize
	if end > len(items) {
		end = len(items)
	}
	page := listPage{Value: make([]any, 0, end-start)}
	for _, it := range items[start:end] {
		page.Value = append(page.Value, publicDoc(it))
	}
	if end < len(items) {
		q := url.Values{}
		for k, v := range r.URL.Query() {
			if k != "$skipToken" {
				q[k] = v
			}
		}
		q.Set("$skipToken", base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(Str(items[end-1], "id")))))
		page.NextLink = e.base(r) + r.URL.EscapedPath() + "?" + q.Encode()
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
