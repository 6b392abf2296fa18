package imds

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzIMDSQuery: any path, query and headers get IMDS's answers (200, 400, 404, 405), never a
// server error or a panic, and a 200 without the Metadata header never happens.
func FuzzIMDSQuery(f *testing.F) {
	s := New(newStore())
	s.SetDefaultVM("as1-vm-0")
	for _, c := range [][4]string{
		{"/metadata/instance", "api-version=2021-02-01&format=json", "true", ""},
		{"/metadata/instance/compute/zone", "api-version=2021-02-01&format=text", "true", "pool1_3"},
		{"/metadata/instance/network/interface/0/ipv4/ipAddress/0", "api-version=2021-02-01&format=text", "true", vmID},
		{"/metadata/loadbalancer", "api-version=2020-10-01", "true", ""},
		{"/metadata/instance", "api-version=2021-02-01&api-version=2020-01-01", "true", ""},
		{"/metadata/instance", "api-version=2021-02-01", "", ""},
	} {
		f.Add(c[0], c[1], c[2], c[3])
	}
	f.Fuzz(func(t *testing.T, path, query, metadata, vm string) {
		if !strings.HasPrefix(path, "/") {
			return
		}
		req := httptest.NewRequest(http.MethodGet, "http://169.254.169.254/", nil)
		req.URL = &url.URL{Scheme: "http", Host: "169.254.169.254", Path: path, RawQuery: query}
		req.RequestURI = req.URL.RequestURI()
		if metadata != "" {
			req.Header.Set("Metadata", metadata)
		}
		if vm != "" {
			req.Header.Set("X-Azsim-Vm", vm)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s?%s (Metadata %q, VM %q): HTTP %d %s", path, query, metadata, vm, rec.Code, rec.Body)
		}
		if rec.Code == http.StatusOK && !strings.EqualFold(metadata, "true") {
			t.Fatalf("%s?%s answered without the Metadata header", path, query)
		}
	})
}
