package arm

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzDecodeRequest checks that request decoding never panics and either
// yields an object or ARM's InvalidRequestContent.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{`{}`, `{"location":"eastus","properties":{"a":[1,2,{"b":null}]}}`, `[]`, `{"a":`, `"x"`, `{"n":1e400}`, "{\"a\":1}\n{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := decodeRequest(b)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != "InvalidRequestContent" || ae.Status != http.StatusBadRequest {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if doc == nil {
			t.Fatal("nil document without error")
		}
		_ = CopyDoc(doc)
	})
}

// FuzzServeHTTP drives arbitrary paths and bodies through the engine; every
// answer must be a well-formed HTTP response, never a panic.
func FuzzServeHTTP(f *testing.F) {
	f.Add("PUT", "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachineScaleSets/x", `{"location":"l"}`)
	f.Add("GET", "/subscriptions/s/resourcegroups", "")
	f.Add("POST", "/subscriptions/s/providers/Microsoft.Compute/locations/l/operations/x", "{")
	e := newTestEngine(Config{})
	f.Fuzz(func(t *testing.T, method, path, body string) {
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " ?#\x00\r\n") || strings.ContainsAny(method, " \x00\r\n") || method == "" {
			return
		}
		req, err := http.NewRequest(method, "https://azsim.test"+path+"?api-version=2025-04-01", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s → %d %s", method, path, rec.Code, rec.Body.String())
		}
	})
}
