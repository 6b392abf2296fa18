package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// docEndpoint is a row of docs/operations.md's endpoint table.
type docEndpoint struct {
	path      string
	profiling bool // served only with --profiling
	anonymous bool // no credentials needed
}

// docEndpoints parses the table under "## Endpoints".
func docEndpoints(t *testing.T) []docEndpoint {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Endpoints")
	if i < 0 {
		t.Fatal("docs/operations.md has no Endpoints section")
	}
	section := doc[i:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	row := regexp.MustCompile("(?m)^\\| `(/[^`]*)` \\| ([^|]+) \\| ([^|]+) \\|")
	var out []docEndpoint
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		served, auth := strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
		e := docEndpoint{path: m[1], profiling: strings.Contains(served, "--profiling"), anonymous: auth == "none"}
		if served != "always" && !e.profiling {
			t.Fatalf("docs/operations.md: %s is served %q: want always or with `--profiling`", e.path, served)
		}
		out = append(out, e)
	}
	if len(out) < 4 {
		t.Fatalf("docs/operations.md's endpoint table has %d rows", len(out))
	}
	return out
}

// TestEndpointsMatchDocs requests every path of docs/operations.md's endpoint table, and the
// paths a controller manager may serve that the table does not list, from the running CCM with
// and without --profiling: each documented path answers as documented (served or not, open or
// behind delegated authorization), and nothing undocumented is served.
func TestEndpointsMatchDocs(t *testing.T) {
	working(t)
	nodesRequireBinary(t, framework.CCMBinaryName)
	documented := docEndpoints(t)
	// Paths that generic Kubernetes components serve: each must be in the table or answer 404.
	candidates := []string{"/healthz", "/healthz/ping", "/healthz/leaderElection", "/readyz", "/livez", "/metrics",
		"/metrics/slis", "/configz", "/debug/pprof/", "/debug/pprof/heap", "/debug/flags", "/debug/flags/v", "/flagz", "/statusz", "/version"}
	e := framework.Start(t, framework.Options{})
	admin, err := rest.TLSConfigFor(e.RestConfig)
	if err != nil {
		t.Fatal(err)
	}
	admin.RootCAs, admin.InsecureSkipVerify = nil, true // the CCM's serving certificate is self-signed
	clients := map[string]*http.Client{
		"admin":     {Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: admin}},
		"anonymous": {Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}},
	}
	get := func(who, path string) int {
		t.Helper()
		resp, err := clients[who].Get(fmt.Sprintf("https://127.0.0.1:%d%s", e.CCMPort(), path))
		if err != nil {
			t.Fatalf("GET %s as %s: %v", path, who, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, profiling := range []bool{false, true} {
		t.Run(fmt.Sprintf("--profiling=%v", profiling), func(t *testing.T) {
			// The default authorization paths, as the chart runs it.
			e.StartCCM(fmt.Sprintf("--profiling=%v", profiling), "--authorization-always-allow-paths=/healthz,/readyz,/livez")
			defer func() { _ = e.StopCCM() }()
			e.WaitFor("/healthz answers", func(context.Context) (bool, error) {
				resp, err := clients["anonymous"].Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", e.CCMPort()))
				if err != nil {
					return false, err
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, fmt.Errorf("HTTP %d", resp.StatusCode)
			}, time.Minute)
			// The port serves before the client CA is read from the cluster's
			// extension-apiserver-authentication ConfigMap; until then the admin's certificate is
			// not checked and its requests are anonymous (403 everywhere but the open paths).
			e.WaitFor("the cluster admin's certificate is recognised (/metrics answers)", func(context.Context) (bool, error) {
				resp, err := clients["admin"].Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", e.CCMPort()))
				if err != nil {
					return false, err
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, fmt.Errorf("HTTP %d", resp.StatusCode)
			}, time.Minute)
			inDoc := map[string]bool{}
			for _, d := range documented {
				inDoc[d.path] = true
				want := !d.profiling || profiling
				code := get("admin", d.path)
				if served := code != http.StatusNotFound; served != want {
					t.Errorf("%s: HTTP %d for the cluster admin; the table says served=%v", d.path, code, want)
				}
				if !want {
					continue
				}
				anon := get("anonymous", d.path)
				if d.anonymous && anon != http.StatusOK {
					t.Errorf("%s: HTTP %d without credentials; the table says none are needed", d.path, anon)
				}
				if !d.anonymous && anon != http.StatusUnauthorized && anon != http.StatusForbidden {
					t.Errorf("%s: HTTP %d without credentials; the table says delegated", d.path, anon)
				}
			}
			for _, p := range candidates {
				if inDoc[p] || inDoc[strings.TrimSuffix(p, "heap")] {
					continue
				}
				if code := get("admin", p); code != http.StatusNotFound {
					t.Errorf("%s is served (HTTP %d) but docs/operations.md's endpoint table does not list it", p, code)
				}
			}
		})
	}
}
