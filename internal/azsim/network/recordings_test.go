package network

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// recordingsDir holds go-vcr recordings of real ARM traffic (see
// /work/shared/reference/arm-protocol.md §1.3). They are not part of the
// repository; point AZSIM_RECORDINGS at a copy to run the conformance test.
func recordingsDir() string {
	if d := os.Getenv("AZSIM_RECORDINGS"); d != "" {
		return d
	}
	return "/work/shared/fixtures/arm-recordings"
}

type cassette struct {
	Interactions []struct {
		Request struct {
			Body    string              `json:"body"`
			Headers map[string][]string `json:"headers"`
			URL     string              `json:"url"`
			Method  string              `json:"method"`
		} `json:"request"`
		Response struct {
			Body    string              `json:"body"`
			Headers map[string][]string `json:"headers"`
			Code    int                 `json:"code"`
		} `json:"response"`
	} `json:"interactions"`
}

const realARM = "https://management.azure.com"

// TestRecordedNetworkTraffic replays the recorded request sequences against
// the engine and requires the same status codes and error codes, and the same
// polling headers on writes. Body differences in server-filled defaults are
// logged, not failed.
func TestRecordedNetworkTraffic(t *testing.T) {
	dir := recordingsDir()
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("recordings not available: %v", err)
	}
	for _, name := range []string{"resourcegroup", "virtualnetwork", "subnet", "securitygroup", "routetable", "publicipaddress",
		"publicipprefix", "loadbalancer", "backendaddresspool", "interface", "natgateway", "servicegateway"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var c cassette
			if err := yaml.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			e := arm.NewEngine(arm.Config{BaseURL: func() string { return realARM }})
			Register(e)
			var lastAsync, lastLocation string
			seen := map[string]bool{}
			for i, it := range c.Interactions {
				u := strings.TrimPrefix(it.Request.URL, realARM)
				if strings.Contains(u, "/operations/") && lastAsync != "" {
					u = strings.TrimPrefix(lastAsync, realARM)
				} else if strings.Contains(strings.ToLower(u), "/operationresults/") && lastLocation != "" {
					u = strings.TrimPrefix(lastLocation, realARM)
				}
				req := httptest.NewRequest(it.Request.Method, realARM+u, strings.NewReader(it.Request.Body))
				req.Header.Set("Authorization", "Bearer recorded")
				for _, h := range []string{"If-Match", "If-None-Match", "Content-Type"} {
					if v := it.Request.Headers[h]; len(v) > 0 {
						req.Header.Set(h, v[0])
					}
				}
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				where := it.Request.Method + " " + u
				path := strings.ToLower(strings.SplitN(u, "?", 2)[0])
				first := it.Request.Method == http.MethodPut && !seen[path]
				seen[path] = true
				if first && rec.Code == http.StatusCreated && it.Response.Code == http.StatusOK {
					// The resource existed before this recording started.
					it.Response.Code = rec.Code
				}
				if dev, ok := knownDeviations[name+"#"+strconv.Itoa(i)]; ok && rec.Code == dev.code {
					t.Logf("#%d %s: known deviation: %s", i, where, dev.why)
					it.Response.Code = rec.Code
				}
				if rec.Code != it.Response.Code {
					t.Errorf("#%d %s: status %d, recorded %d\n  got: %s\n  recorded: %.300s", i, where, rec.Code, it.Response.Code, rec.Body.String(), it.Response.Body)
					continue
				}
				if rec.Code >= 400 {
					if got, want := errorCode(rec.Body.Bytes()), errorCode([]byte(it.Response.Body)); got != want {
						t.Errorf("#%d %s: error code %q, recorded %q", i, where, got, want)
					}
					continue
				}
				for _, h := range []string{"Azure-AsyncOperation", "Location"} {
					// The recorder strips some polling headers, so only require the recorded ones.
					if len(it.Response.Headers[h]) > 0 && rec.Header().Get(h) == "" {
						t.Errorf("#%d %s: header %s missing", i, where, h)
					}
				}
				if a := rec.Header().Get("Azure-AsyncOperation"); a != "" {
					lastAsync = a
				}
				if l := rec.Header().Get("Location"); l != "" {
					lastLocation = l
				}
				if missing := missingKeys(it.Response.Body, rec.Body.String()); len(missing) > 0 {
					t.Logf("#%d %s: keys in the recording but not in azsim's answer: %v", i, where, missing)
				}
			}
		})
	}
}

// knownDeviations are recorded answers azsim deliberately does not copy.
var knownDeviations = map[string]struct {
	code int
	why  string
}{
	"virtualnetwork#6": {http.StatusOK, "NRP answered 201 to an update of an existing VNet; azsim answers updates with 200 as every other NRP type does"},
}

func errorCode(b []byte) string {
	var eb struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &eb)
	return eb.Error.Code
}

// missingKeys lists JSON object paths present in want but not in got
// (arrays are compared by their first element).
func missingKeys(want, got string) []string {
	var w, g any
	if json.Unmarshal([]byte(want), &w) != nil || json.Unmarshal([]byte(got), &g) != nil {
		return nil
	}
	var out []string
	var walk func(path string, w, g any)
	walk = func(path string, w, g any) {
		switch wv := w.(type) {
		case map[string]any:
			gv, _ := g.(map[string]any)
			for k, x := range wv {
				y, ok := gv[k]
				if !ok {
					out = append(out, path+"."+k)
					continue
				}
				walk(path+"."+k, x, y)
			}
		case []any:
			gv, _ := g.([]any)
			if len(wv) > 0 && len(gv) > 0 {
				walk(path+"[0]", wv[0], gv[0])
			}
		}
	}
	walk("", w, g)
	sort.Strings(out)
	return out
}
