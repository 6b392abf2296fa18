package network

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Location-scoped private link operations:
//
//	POST …/providers/Microsoft.Network/locations/{l}/checkPrivateLinkServiceVisibility
//	GET  …/providers/Microsoft.Network/locations/{l}/autoApprovedPrivateLinkServices
//
// under a subscription or a resource group (the group only has to exist: the
// answers are the subscription's).
var plsLocationPath = regexp.MustCompile(`(?i)^/subscriptions/([^/]+)(?:/resourceGroups/([^/]+))?/providers/Microsoft\.Network/locations/([^/]+)/(checkPrivateLinkServiceVisibility|autoApprovedPrivateLinkServices)/?$`)

func registerPrivateLinkActions(e *arm.Engine) {
	e.AddRoute(func(r *http.Request) bool { return plsLocationPath.MatchString(r.URL.Path) },
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { servePrivateLinkLocation(e, w, r) }))
}

func servePrivateLinkLocation(e *arm.Engine, w http.ResponseWriter, r *http.Request) {
	m := plsLocationPath.FindStringSubmatch(r.URL.Path)
	sub, rg, op := m[1], m[2], strings.ToLower(m[4])
	v := r.URL.Query().Get("api-version")
	if v == "" {
		arm.WriteError(w, arm.BadRequest("MissingApiVersionParameter", "The api-version query parameter (?api-version=) is required for all requests."))
		return
	}
	if !containsFold(arm.NetworkAPIVersions, v) {
		arm.WriteError(w, arm.BadRequest("NoRegisteredProviderFound",
			"No registered resource provider found for location '%s' and API version '%s' for type 'locations/%s'. The supported api-versions are '%s'.",
			m[3], v, m[4], strings.Join(arm.NetworkAPIVersions, ", ")))
		return
	}
	want := http.MethodGet
	if op == "checkprivatelinkservicevisibility" {
		want = http.MethodPost
	}
	if r.Method != want {
		arm.WriteError(w, arm.Errorf(http.StatusMethodNotAllowed, "MethodNotAllowed", "The method '%s' is not allowed.", r.Method))
		return
	}
	var alias string
	if want == http.MethodPost {
		var body struct {
			PrivateLinkServiceAlias *string `json:"privateLinkServiceAlias"`
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err := json.Unmarshal(b, &body); err != nil || body.PrivateLinkServiceAlias == nil {
			arm.WriteError(w, arm.BadRequest("InvalidRequestContent", "The request content was invalid: it needs privateLinkServiceAlias."))
			return
		}
		alias = *body.PrivateLinkServiceAlias
	}
	var out any
	err := e.Do(func(tx *arm.Tx) error {
		if rg != "" {
			if _, ok := tx.Get("/subscriptions/" + sub + "/resourceGroups/" + rg); !ok {
				return arm.ResourceGroupNotFound(rg)
			}
		}
		if want == http.MethodPost {
			visible := false
			for _, pls := range tx.List(plsType, "") {
				p := arm.Props(pls)
				if strings.EqualFold(arm.Str(p, "alias"), strings.TrimSpace(alias)) {
					visible = Visible(arm.MustParseID(arm.Str(pls, "id")).Subscription, sub, subscriptionsOf(p, "visibility"), subscriptionsOf(p, "autoApproval"))
				}
			}
			out = map[string]any{"visible": visible}
			return nil
		}
		value := []any{}
		for _, pls := range tx.List(plsType, "") {
			p := arm.Props(pls)
			if normLocation(arm.Str(pls, "location")) == normLocation(m[3]) && inSubscriptionList(subscriptionsOf(p, "autoApproval"), sub) {
				value = append(value, map[string]any{"privateLinkService": arm.Str(pls, "id")})
			}
		}
		out = map[string]any{"value": value}
		return nil
	})
	if err != nil {
		arm.WriteError(w, err)
		return
	}
	arm.WriteJSON(w, http.StatusOK, out)
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
