package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/server/healthz"
)

// /healthz fails until every informer has synced, naming the ones still waiting, and has a
// leader election check when leader election is on.
func TestHealthReflectsInformerSync(t *testing.T) {
	synced := map[string]bool{}
	h := newHealth(true)
	for _, n := range []string{"nodes", "persistentvolumeclaims"} {
		h.addSynced(n, func() bool { return synced[n] })
	}
	mux := http.NewServeMux()
	healthz.InstallHandler(mux, h.checks()...)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz?verbose"); code != http.StatusInternalServerError || !strings.Contains(body, "[-]informer-sync failed") ||
		!strings.Contains(body, "[+]leaderElection ok") {
		t.Fatalf("before sync: %d %s", code, body)
	}
	synced["nodes"] = true
	if code, body := get("/healthz/informer-sync"); code != http.StatusInternalServerError || !strings.Contains(body, "persistentvolumeclaims") ||
		strings.Contains(body, "nodes") {
		t.Fatalf("half synced: %d %s", code, body)
	}
	synced["persistentvolumeclaims"] = true
	if code, body := get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("synced: %d %s", code, body)
	}
	for _, c := range newHealth(false).checks() {
		if c.Name() == "leaderElection" {
			t.Error("a leader election check without leader election")
		}
	}
}
