package compute

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// GETs of VMs and scale set instances (single and lists) are served here
// rather than by the engine's generic GET, because CRP shows the instance
// view only with $expand=instanceView and filters VM lists by
// $filter='virtualMachineScaleSet/id' eq '<id>' (VMSS Flexible members).

func (h *handler) matchInstanceRead(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	id, err := arm.ParseID(r.URL.EscapedPath())
	if err != nil {
		return false
	}
	t := id.FullType()
	return strings.EqualFold(t, TypeVM) || strings.EqualFold(t, TypeVMSSVM)
}

func (h *handler) serveInstanceRead(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := q.Get("api-version")
	if v == "" {
		writeARMError(w, arm.BadRequest("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."))
		return
	}
	if !contains(arm.ComputeAPIVersions, v) {
		writeARMError(w, arm.BadRequest("NoRegisteredProviderFound",
			"No registered resource provider found for location 'global' and API version '%s' for type 'virtualMachines'. The supported api-versions are '%s'.",
			v, strings.Join(arm.ComputeAPIVersions, ", ")))
		return
	}
	id, _ := arm.ParseID(r.URL.EscapedPath())
	expand := false
	for _, e := range strings.Split(q.Get("$expand"), ",") {
		expand = expand || strings.EqualFold(strings.TrimSpace(e), "instanceView")
	}
	scaleSetVM := strings.EqualFold(id.FullType(), TypeVMSSVM)
	if scaleSetVM && !id.IsCollection() {
		if _, ok := ParseInstanceID(id.Name()); !ok {
			e := invalidParameter("instanceId", "Virtual Machine Scale Set VM instanceId must be a number.")
			writeARMError(w, e)
			return
		}
	}
	var (
		status = http.StatusOK
		body   any
		etag   string
	)
	err := h.e.Do(func(tx *arm.Tx) error {
		if err := requireGroup(tx, id); err != nil {
			return err
		}
		if !id.IsCollection() {
			doc, ok := tx.Get(id.String())
			if !ok {
				if p, isChild := id.Parent(); isChild {
					if _, ok := tx.Get(p.String()); !ok {
						return arm.NotFoundTopLevel(p)
					}
					return arm.Errorf(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location.")
				}
				return arm.NotFoundTopLevel(id)
			}
			etag, _ = doc["etag"].(string)
			body = view(doc, expand)
			return nil
		}
		var items []map[string]any
		if scaleSetVM {
			ss, _ := id.Parent()
			if _, ok := tx.Get(ss.String()); !ok {
				return arm.NotFoundTopLevel(ss)
			}
			items = tx.List(TypeVMSSVM, ss.String())
		} else {
			f, err := ParseVMListFilter(q.Get("$filter"))
			if err != nil {
				return invalidParameter("$filter", "%v", err)
			}
			for _, d := range tx.List(TypeVM, id.Scope()) {
				if f.Match(arm.Str(d, "properties", "virtualMachineScaleSet", "id")) {
					items = append(items, d)
				}
			}
		}
		page, err := h.page(r, items, expand)
		body = page
		return err
	})
	if err != nil {
		writeARMError(w, err)
		return
	}
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	writeJSONBody(w, status, body)
}

func requireGroup(tx *arm.Tx, id arm.ResourceID) error {
	rg, ok := id.ResourceGroupID()
	if !ok {
		return nil
	}
	if _, exists := tx.Get(rg.String()); !exists {
		return arm.ResourceGroupNotFound(id.ResourceGroup)
	}
	return nil
}

// view copies a stored document for a response, without the instance view
// unless it was asked for.
func view(doc map[string]any, expand bool) map[string]any {
	out := arm.CopyDoc(doc)
	if !expand {
		if p := arm.Obj(out, false, "properties"); p != nil {
			delete(p, "instanceView")
		}
	}
	return out
}

type listPage struct {
	Value    []any  `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

// page cuts a sorted list into ARM pages: $skipToken is the lower-cased ID of
// the last item of the previous page, so pages stay correct when instances
// come and go between calls; nextLink is absolute and keeps the query.
func (h *handler) page(r *http.Request, items []map[string]any, expand bool) (*listPage, error) {
	sort.SliceStable(items, func(i, j int) bool {
		return strings.ToLower(arm.Str(items[i], "id")) < strings.ToLower(arm.Str(items[j], "id"))
	})
	start := 0
	if tok := r.URL.Query().Get("$skipToken"); tok != "" {
		last, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, arm.BadRequest("InvalidSkipToken", "The $skipToken '%s' is invalid.", tok)
		}
		start = sort.Search(len(items), func(i int) bool { return strings.ToLower(arm.Str(items[i], "id")) > string(last) })
	}
	size := h.e.Config().PageSize
	end := min(start+size, len(items))
	p := &listPage{Value: make([]any, 0, end-start)}
	for _, it := range items[start:end] {
		p.Value = append(p.Value, view(it, expand))
	}
	if end < len(items) {
		q := url.Values{}
		for k, v := range r.URL.Query() {
			if k != "$skipToken" {
				q[k] = v
			}
		}
		q.Set("$skipToken", base64.RawURLEncoding.EncodeToString([]byte(strings.ToLower(arm.Str(items[end-1], "id")))))
		p.NextLink = baseURL(h.e, r) + r.URL.EscapedPath() + "?" + q.Encode()
	}
	return p, nil
}

func baseURL(e *arm.Engine, r *http.Request) string {
	if b := e.Config().BaseURL; b != nil {
		return strings.TrimRight(b(), "/")
	}
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	return scheme + "://" + r.Host
}
