// Package recordings replays recorded real ARM exchanges (go-vcr cassettes) against azsim's
// engine and compares what a client sees: status codes, ARM error codes, ETag values and
// shapes, and the shape of the polling URLs. The conformance tests of the compute and network
// handlers use it.
//
// The cassettes are not part of the repository. They are found in
// ../shared/fixtures/arm-recordings next to the repository root (the layout of the project's
// work trees) or wherever AZSIM_RECORDINGS points. When they are missing the tests skip, except
// under CI (the CI environment variable set), where a missing ground truth is a failure.
package recordings

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// EnvDir overrides where the cassettes are.
const EnvDir = "AZSIM_RECORDINGS"

// ARMHost is the host the cassettes were recorded against.
const ARMHost = "https://management.azure.com"

// Dir returns the cassette directory, skipping the test when it is missing (failing under CI).
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Locate(os.Getenv(EnvDir), ".")
	if err == nil {
		if _, err = os.Stat(dir); err == nil {
			return dir
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("ARM recordings not found (%v); set %s or provide ../shared/fixtures/arm-recordings next to the repository", err, EnvDir)
		return ""
	}
	t.Skipf("ARM recordings not available (%v); set %s to run the conformance test", err, EnvDir)
	return ""
}

// Locate resolves the cassette directory: override if set, else
// <repository root>/../shared/fixtures/arm-recordings, the root being the nearest directory
// at or above start that holds go.mod.
func Locate(override, start string) (string, error) {
	if override != "" {
		return override, nil
	}
	root, err := repoRoot(start)
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(root), "shared", "fixtures", "arm-recordings"), nil
}

// repoRoot is the nearest directory at or above start that holds go.mod.
func repoRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above %s", start)
		}
		dir = parent
	}
}

// Cassette is a go-vcr recording.
type Cassette struct {
	Interactions []Interaction `json:"interactions"`
}

// Interaction is one recorded request and its answer.
type Interaction struct {
	Request struct {
		Method  string              `json:"method"`
		URL     string              `json:"url"`
		Body    string              `json:"body"`
		Headers map[string][]string `json:"headers"`
	} `json:"request"`
	Response struct {
		Code    int                 `json:"code"`
		Body    string              `json:"body"`
		Headers map[string][]string `json:"headers"`
	} `json:"response"`
}

// Load reads dir/name.yaml.
func Load(t testing.TB, dir, name string) Cassette {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c Cassette
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// Deviation is a recorded answer azsim deliberately does not reproduce. Status, when set, is
// the status azsim gives instead (anything else still fails); the rest of the interaction's
// checks are skipped.
type Deviation struct {
	Status int
	Why    string
}

// Options tune a replay.
type Options struct {
	// Deviations by "<cassette>#<interaction index>".
	Deviations map[string]Deviation
	// PreexistingCreate accepts 201 for a recorded 200 on the first PUT of a path: the
	// resource existed before the recording started.
	PreexistingCreate bool
	// BodyDifferences are the differences between azsim's answer bodies and the recorded ones
	// that azsim keeps on purpose, by BodyDifferenceKey, with the reason; any other difference
	// fails the replay.
	BodyDifferences map[string]string
}

// Replay sends every recorded request to h (in order, with its If-Match / If-None-Match and
// body) and compares the answers. Polling URLs of the recording are mapped to the ones azsim
// returned for the same operation, so the sequence of polls is replayed too. It returns the
// keys of the body differences it found (listed in o.BodyDifferences or not), for
// CheckBodyDifferences.
func Replay(t *testing.T, name string, c Cassette, h http.Handler, o Options) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	polls := map[string]string{} // recorded polling path (lower-cased) → azsim URL
	seen := map[string]bool{}
	for i, it := range c.Interactions {
		u := strings.TrimPrefix(it.Request.URL, ARMHost)
		if mapped, ok := polls[pollKey(it.Request.URL)]; ok {
			u = strings.TrimPrefix(mapped, ARMHost)
		}
		req := httptest.NewRequest(it.Request.Method, ARMHost+u, strings.NewReader(it.Request.Body))
		req.Header.Set("Authorization", "Bearer recorded")
		for _, hd := range []string{"If-Match", "If-None-Match", "Content-Type"} {
			if v := header(it.Request.Headers, hd); len(v) > 0 {
				req.Header.Set(hd, v[0])
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		where := fmt.Sprintf("%s#%d %s %s", name, i, it.Request.Method, shortPath(u))
		// Map the polling URLs before any check, so that later polls reach azsim's operation.
		for _, hd := range []string{"Azure-AsyncOperation", "Location"} {
			if rec, got := first(header(it.Response.Headers, hd)), w.Header().Get(hd); rec != "" && got != "" {
				polls[pollKey(rec)] = got
			}
		}
		want := it.Response.Code
		path := strings.ToLower(strings.SplitN(u, "?", 2)[0])
		firstPut := it.Request.Method == http.MethodPut && !seen[path]
		seen[path] = true
		if o.PreexistingCreate && firstPut && w.Code == http.StatusCreated && want == http.StatusOK {
			want = w.Code
		}
		if dev, ok := o.Deviations[name+"#"+strconv.Itoa(i)]; ok {
			if dev.Status != 0 && w.Code != dev.Status {
				t.Errorf("%s: known deviation (%s) expects status %d, got %d", where, dev.Why, dev.Status, w.Code)
			} else {
				t.Logf("%s: known deviation: %s", where, dev.Why)
			}
			continue
		}
		if w.Code != want {
			t.Errorf("%s: status %d, recorded %d\n  got: %.400s\n  recorded: %.300s", where, w.Code, want, w.Body.String(), it.Response.Body)
			continue
		}
		if w.Code >= 400 {
			if got, rec := ErrorCode(w.Body.Bytes()), ErrorCode([]byte(it.Response.Body)); got != rec {
				t.Errorf("%s: error code %q, recorded %q", where, got, rec)
			}
			continue
		}
		for _, d := range ComparePolling(it.Response.Headers, w.Header()) {
			t.Errorf("%s: %s", where, d)
		}
		for _, d := range CompareETags(it.Request.Method, it.Response.Headers, it.Response.Body, w.Header(), w.Body.String()) {
			t.Errorf("%s: %s", where, d)
		}
		if d := CompareOSDiskNames(it.Response.Body, w.Body.String()); d != "" {
			t.Errorf("%s: %s", where, d)
		}
		for _, k := range BodyDifferences(u, it.Response.Body, w.Body.String()) {
			found[k] = true
			if _, ok := o.BodyDifferences[k]; !ok {
				t.Errorf("%s: body differs from the recording: %s", where, k)
			}
		}
	}
	return found
}

// BodyDifferences lists the keys (BodyDifferenceKey) where the body azsim answered (got) and
// the recorded one (want) of a request to path differ: keys the recording has and azsim's
// answer lacks ("missing"), and keys azsim's answer has that the recording lacks ("extra").
// Values are not compared (IDs, GUIDs and times differ by nature); arrays are compared by
// their first elements.
func BodyDifferences(path, want, got string) []string {
	typ := ResourceType(path)
	var out []string
	for _, k := range MissingKeys(want, got) {
		out = append(out, BodyDifferenceKey(typ, "missing", k))
	}
	for _, k := range MissingKeys(got, want) {
		out = append(out, BodyDifferenceKey(typ, "extra", k))
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// BodyDifferenceKey names a body difference: "<resource type> <missing|extra> <key path>",
// e.g. "Microsoft.Compute/virtualMachines missing .properties.osProfile.secrets". A list's
// items and a single resource share keys (the list's ".value[0]" is dropped).
func BodyDifferenceKey(resourceType, kind, path string) string {
	return resourceType + " " + kind + " " + strings.TrimPrefix(path, ".value[0]")
}

// ResourceType is the type a request path addresses, e.g. Microsoft.Compute/virtualMachines for
// a VM, a list of VMs or a VM action, Microsoft.Compute/locations/DiskOperations for a disk
// operation's status, Microsoft.Resources/resourceGroups for a resource group.
func ResourceType(path string) string {
	p := strings.Trim(strings.SplitN(path, "?", 2)[0], "/")
	i := strings.LastIndex(strings.ToLower(p), "providers/")
	if i < 0 {
		return "Microsoft.Resources/resourceGroups"
	}
	segs := strings.Split(p[i+len("providers/"):], "/")
	out := segs[0]
	for j := 1; j < len(segs); j += 2 {
		out += "/" + segs[j]
	}
	return out
}

// CheckBodyDifferences fails t for every listed body difference that no replay found: a
// difference azsim no longer has must leave the list.
func CheckBodyDifferences(t testing.TB, listed map[string]string, found map[string]bool) {
	t.Helper()
	var stale []string
	for k := range listed {
		if !found[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(stale)
	for _, k := range stale {
		t.Errorf("listed body difference no longer found (remove it from the list and docs/azsim.md): %s", k)
	}
}

// CheckDocumented fails t for every listed body difference that the section "Differences from
// recorded ARM answers" of docs/azsim.md does not name.
func CheckDocumented(t testing.TB, listed map[string]string) {
	t.Helper()
	root, err := repoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(root, "docs", "azsim.md")
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	const heading = "## Differences from recorded ARM answers"
	start := strings.Index(text, heading)
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, heading)
	}
	section := text[start+len(heading):]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	for k := range listed {
		if !strings.Contains(section, "`"+k+"`") {
			t.Errorf("%s does not name the body difference `%s` in %q", doc, k, heading)
		}
	}
}

// ComparePolling compares the polling headers of a recorded and an actual answer: each one the
// recording has must be there, with the same URL shape (see URLShape); one the recording lacks
// must be absent too.
func ComparePolling(recorded map[string][]string, got http.Header) []string {
	var out []string
	for _, hd := range []string{"Azure-AsyncOperation", "Location"} {
		rec, act := first(header(recorded, hd)), got.Get(hd)
		switch {
		case rec == "" && act != "":
			out = append(out, fmt.Sprintf("header %s %s sent, the recording has none", hd, act))
		case rec != "" && act == "":
			out = append(out, fmt.Sprintf("header %s missing (recorded %s)", hd, URLShape(rec)))
		case rec != "" && URLShape(rec) != URLShape(act):
			out = append(out, fmt.Sprintf("header %s shape %s, recorded %s", hd, URLShape(act), URLShape(rec)))
		}
	}
	return out
}

var (
	guidRE   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	counter  = regexp.MustCompile(`^"[0-9]+"$`)
	weakGUID = regexp.MustCompile(`^W/"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"$`)
)

// signatureParams are the signed-URL parameters ARM adds to polling links (their values are
// opaque and the recorder replaced them); their presence is not part of the shape.
var signatureParams = map[string]bool{"c": true, "h": true, "s": true, "t": true}

// URLShape reduces a polling URL to what a client can depend on: the path with the
// subscription and operation IDs replaced by placeholders (segment names keep their case),
// the region lower-cased, and the sorted query parameter names with the api-version value.
func URLShape(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "unparsable:" + raw
	}
	segs := strings.Split(strings.Trim(u.Path, "/"), "/")
	for i, s := range segs {
		switch {
		case i > 0 && strings.EqualFold(segs[i-1], "subscriptions"):
			segs[i] = "{sub}"
		case i > 0 && strings.EqualFold(segs[i-1], "locations"):
			segs[i] = strings.ToLower(s)
		case i == len(segs)-1:
			segs[i] = "{id}"
		}
	}
	var keys []string
	q := u.Query()
	for k := range q {
		if signatureParams[k] {
			continue
		}
		switch k {
		case "api-version":
			keys = append(keys, k+"="+q.Get(k))
		default:
			v := q.Get(k)
			if guidRE.MatchString(v) {
				v = "{guid}"
			}
			keys = append(keys, k+"="+v)
		}
	}
	sort.Strings(keys)
	return "/" + strings.Join(segs, "/") + "?" + strings.Join(keys, "&")
}

// CompareETags compares the ETag header and body etag of a recorded and an actual answer.
// Compute counters ("3") must have the recorded value; Network weak GUIDs (sanitised to zeros
// in the recordings) must have the shape. The header and the body must agree. An ETag header
// the recording lacks is a difference on writes only: the recorder kept it on most reads but
// not all.
func CompareETags(method string, recH map[string][]string, recBody string, got http.Header, gotBody string) []string {
	var out []string
	read := method == http.MethodGet || method == http.MethodHead
	check := func(what, rec, act string) {
		switch {
		case rec == "" && act != "" && read && what == "ETag header":
		case rec == "" && act != "":
			out = append(out, fmt.Sprintf("%s %s sent, the recording has none", what, act))
		case rec == "":
		case act == "":
			out = append(out, fmt.Sprintf("%s missing (recorded %s)", what, rec))
		case counter.MatchString(rec) && act != rec:
			out = append(out, fmt.Sprintf("%s %s, recorded %s", what, act, rec))
		case weakGUID.MatchString(rec) && !weakGUID.MatchString(act):
			out = append(out, fmt.Sprintf("%s %s is not a weak GUID etag like the recorded %s", what, act, rec))
		case !counter.MatchString(rec) && !weakGUID.MatchString(rec) && act != rec:
			out = append(out, fmt.Sprintf("%s %s, recorded %s", what, act, rec))
		}
	}
	recBodyTag, gotBodyTag := bodyETag(recBody), bodyETag(gotBody)
	check("ETag header", first(header(recH, "ETag")), got.Get("ETag"))
	check("body etag", recBodyTag, gotBodyTag)
	if h := got.Get("ETag"); h != "" && gotBodyTag != "" && h != gotBodyTag {
		out = append(out, fmt.Sprintf("ETag header %s differs from body etag %s", h, gotBodyTag))
	}
	return out
}

var hex32 = regexp.MustCompile(`[0-9a-f]{32}`)

// CompareOSDiskNames compares the shape of the OS disk names in a recorded and an actual
// answer (a VM, a scale set instance, or the first element of a list): the same name with
// CRP's 32-hex-digit suffix as a placeholder.
func CompareOSDiskNames(recBody, gotBody string) string {
	name := func(body string) string {
		var doc struct {
			Properties struct {
				StorageProfile struct {
					OSDisk struct {
						Name string `json:"name"`
					} `json:"osDisk"`
				} `json:"storageProfile"`
			} `json:"properties"`
			Value []json.RawMessage `json:"value"`
		}
		if json.Unmarshal([]byte(body), &doc) != nil {
			return ""
		}
		if n := doc.Properties.StorageProfile.OSDisk.Name; n != "" || len(doc.Value) == 0 {
			return hex32.ReplaceAllString(n, "{hex}")
		}
		var first struct {
			Properties struct {
				StorageProfile struct {
					OSDisk struct {
						Name string `json:"name"`
					} `json:"osDisk"`
				} `json:"storageProfile"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(doc.Value[0], &first)
		return hex32.ReplaceAllString(first.Properties.StorageProfile.OSDisk.Name, "{hex}")
	}
	rec, got := name(recBody), name(gotBody)
	if rec != "" && rec != got {
		return fmt.Sprintf("OS disk name %q, recorded %q", got, rec)
	}
	return ""
}

func bodyETag(body string) string {
	var doc struct {
		ETag string `json:"etag"`
	}
	_ = json.Unmarshal([]byte(body), &doc)
	return doc.ETag
}

// pollKey identifies a recorded polling URL: its path, plus monitor=true for CRP's Location
// (the same path as its Azure-AsyncOperation).
func pollKey(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.ToLower(raw)
	}
	k := strings.ToLower(u.Path)
	if strings.EqualFold(u.Query().Get("monitor"), "true") {
		k += "?monitor=true"
	}
	return k
}

func header(h map[string][]string, name string) []string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func shortPath(u string) string {
	p := strings.SplitN(u, "?", 2)[0]
	if i := strings.Index(strings.ToLower(p), "/providers/"); i >= 0 {
		return p[i:]
	}
	return p
}

// ErrorCode is the code of an ARM error body, or "".
func ErrorCode(b []byte) string {
	var body struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &body)
	return body.Error.Code
}

// MissingKeys lists object paths of want that got lacks (arrays: first element).
func MissingKeys(want, got string) []string {
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
				if y, ok := gv[k]; ok {
					walk(path+"."+k, x, y)
				} else {
					out = append(out, path+"."+k)
				}
			}
		case []any:
			if gv, _ := g.([]any); len(wv) > 0 && len(gv) > 0 {
				walk(path+"[0]", wv[0], gv[0])
			}
		}
	}
	walk("", w, g)
	sort.Strings(out)
	return out
}
