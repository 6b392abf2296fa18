package server

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// zeros is an endless body that costs the sender no memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A 400 MB request without credentials is refused without azsim holding it: 413 when its length
// is announced (before authentication), and in any case no more than the limit is allocated.
func TestHugeUnauthenticatedBodyIsNotRead(t *testing.T) {
	sim, err := Start(context.Background(), Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sim.Close() }()
	const size = 400 << 20
	url := sim.URL() + "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg/providers/Microsoft.Network/loadBalancers/lb?api-version=2024-05-01"
	for _, tc := range []struct {
		name       string
		announced  bool
		token      bool
		wantStatus int
	}{
		{"announced length, no token", true, false, http.StatusRequestEntityTooLarge},
		{"announced length, valid token", true, true, http.StatusRequestEntityTooLarge},
		{"chunked, no token", false, false, http.StatusUnauthorized},
		{"chunked, valid token", false, true, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPut, url, io.LimitReader(zeros{}, size))
			if err != nil {
				t.Fatal(err)
			}
			if tc.announced {
				req.ContentLength = size
			} else {
				req.ContentLength = -1
			}
			if tc.token {
				tok, _, err := sim.Identity().Issuer.Issue(sim.URL()+"/", DefaultTenantID, DefaultClientID, DefaultClientID, "https://management.azure.com/")
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			resp, err := sim.HTTPClient().Do(req.WithContext(ctx))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("HTTP %d, %d MB allocated in the process while a %d MB body was sent", resp.StatusCode, allocated>>20, size>>20)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantStatus == http.StatusRequestEntityTooLarge && !strings.Contains(string(body), "RequestContentTooLarge") {
				t.Errorf("body %s", body)
			}
			// The body is 400 MB; what azsim (and this test's client) allocate stays near the
			// 4 MiB limit. Before the limit, azsim read it all (RSS 15 → 914 MB).
			if limit := uint64(64 << 20); allocated > limit {
				t.Fatalf("%d MB allocated for one refused request (limit %d MB)", allocated>>20, limit>>20)
			}
		})
	}
}

// The unauthenticated login and IMDS endpoints take at most maxLoginBody: 413 beyond, announced
// or streamed; a body within the limit reaches the handler.
func TestLoginAndIMDSBodiesLimited(t *testing.T) {
	sim, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sim.Close() }()
	token := sim.URL() + "/" + DefaultTenantID + "/oauth2/v2.0/token"
	imdsToken := sim.IMDSURL() + "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=https://management.azure.com/"
	for _, tc := range []struct {
		name       string
		url        string
		size       int64
		announced  bool
		wantStatus int
	}{
		{"login, announced over the limit", token, maxLoginBody + 1, true, http.StatusRequestEntityTooLarge},
		{"login, streamed over the limit", token, maxLoginBody + 1, false, http.StatusRequestEntityTooLarge},
		{"login, within the limit", token, 100, true, http.StatusBadRequest},
		{"IMDS, announced over the limit", imdsToken, maxLoginBody + 1, true, http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, tc.url, io.LimitReader(zeros{}, tc.size))
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = -1
			if tc.announced {
				req.ContentLength = tc.size
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Metadata", "true")
			resp, err := sim.HTTPClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("HTTP %d, want %d: %.200s", resp.StatusCode, tc.wantStatus, body)
			}
		})
	}
}
