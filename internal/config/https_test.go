package config

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The metadata document names the login server that receives the client secret: it is only
// trusted when read over TLS from the configured endpoint, and the endpoints it names must be
// https too.
func TestMetadataMustNameHTTPSEndpoints(t *testing.T) {
	var body string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	c := &Config{Cloud: "AzureSim", ResourceManagerEndpoint: srv.URL}
	for name, tc := range map[string]struct{ body, want string }{
		"http login endpoint": {`[{"name":"AzureSim","resourceManager":"` + srv.URL + `/","authentication":{"audiences":["https://a/"],"loginEndpoint":"http://login.evil.example/"}}]`,
			`authentication.loginEndpoint: "http://login.evil.example/" must be an https:// URL`},
		"no login endpoint": {`[{"name":"AzureSim","resourceManager":"` + srv.URL + `/","authentication":{"audiences":["https://a/"]}}]`,
			"has no authentication.loginEndpoint"},
		"http resource manager": {`[{"name":"AzureSim","resourceManager":"http://arm.example/","authentication":{"audiences":["https://a/"],"loginEndpoint":"https://login.example/"}}]`,
			`resourceManager: "http://arm.example/" must be an https:// URL`},
	} {
		t.Run(name, func(t *testing.T) {
			body = tc.body
			_, err := ResolveEnvironment(context.Background(), c, noEnv, srv.Client())
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "resourceManagerEndpoint: ") {
				t.Fatalf("want an error naming resourceManagerEndpoint and %q, got %v", tc.want, err)
			}
		})
	}
}

// An http:// endpoint never gets a request: the metadata GET itself refuses it, whatever
// Validate did before.
func TestMetadataNotFetchedOverHTTP(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	_, err := ResolveEnvironment(context.Background(), &Config{ResourceManagerEndpoint: srv.URL}, noEnv, nil)
	if err == nil || !strings.Contains(err.Error(), "resourceManagerEndpoint: ") || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("want a refusal naming resourceManagerEndpoint, got %v", err)
	}
	if hits != 0 {
		t.Fatalf("the http endpoint got %d requests", hits)
	}
}

// A redirect (even to https) is not followed: the document must come from the configured host.
func TestMetadataRedirectRefused(t *testing.T) {
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"name":"x","resourceManager":"https://x/","authentication":{"audiences":["https://a/"],"loginEndpoint":"https://evil.example/"}}]`)
	}))
	defer other.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	defer srv.Close()
	_, err := ResolveEnvironment(context.Background(), &Config{ResourceManagerEndpoint: srv.URL}, noEnv, srv.Client())
	if err == nil || !strings.Contains(err.Error(), "redirects are not followed") {
		t.Fatalf("want the redirect refused, got %v", err)
	}
}

func TestEnvironmentFileMustNameHTTPSEndpoints(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "env.json")
	if err := os.WriteFile(path, []byte(`{"name":"local","resourceManagerEndpoint":"https://127.0.0.1:8443/","tokenAudience":"https://aud/","activeDirectoryEndpoint":"http://127.0.0.1:8080/"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := ResolveEnvironment(context.Background(), &Config{Cloud: "AzureStackCloud"}, func(k string) string {
		if k == EnvEnvironmentFile {
			return path
		}
		return ""
	}, nil)
	if err == nil || !strings.Contains(err.Error(), EnvEnvironmentFile) || !strings.Contains(err.Error(), `activeDirectoryEndpoint: "http://127.0.0.1:8080/" must be an https:// URL`) {
		t.Fatalf("want a refusal naming %s and activeDirectoryEndpoint, got %v", EnvEnvironmentFile, err)
	}
}
