package recordings

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tb records Fatalf/Skipf instead of stopping the test.
type tb struct {
	testing.TB
	fatal, skip string
}

func (t *tb) Helper()                        {}
func (t *tb) Fatalf(format string, a ...any) { t.fatal = fmt.Sprintf(format, a...) }
func (t *tb) Skipf(format string, a ...any)  { t.skip = fmt.Sprintf(format, a...) }

func TestDirMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	t.Setenv(EnvDir, missing)
	t.Setenv("CI", "")
	f := &tb{TB: t}
	if Dir(f); f.skip == "" || f.fatal != "" {
		t.Errorf("outside CI a missing directory skips: skip %q fatal %q", f.skip, f.fatal)
	}
	t.Setenv("CI", "true")
	f = &tb{TB: t}
	if Dir(f); f.fatal == "" || f.skip != "" {
		t.Errorf("under CI a missing directory fails: skip %q fatal %q", f.skip, f.fatal)
	}
	t.Setenv(EnvDir, t.TempDir())
	f = &tb{TB: t}
	if d := Dir(f); d != os.Getenv(EnvDir) || f.fatal != "" || f.skip != "" {
		t.Errorf("existing directory: %q %q %q", d, f.fatal, f.skip)
	}
}

func TestLocateRelativeToRepository(t *testing.T) {
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	deep := filepath.Join(repo, "internal", "pkg")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Locate("", deep)
	if want := filepath.Join(root, "shared", "fixtures", "arm-recordings"); err != nil || got != want {
		t.Errorf("Locate = %q, %v; want %q", got, err, want)
	}
	if got, _ := Locate("/elsewhere", deep); got != "/elsewhere" {
		t.Errorf("override ignored: %q", got)
	}
}

func TestURLShape(t *testing.T) {
	for _, c := range []struct{ a, b string }{
		{"https://management.azure.com/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Compute/locations/eastus2/DiskOperations/00000000-0000-0000-0000-000000000000?p=00000000-0000-0000-0000-000000000000&api-version=2025-01-02&c=c&h=h&s=s&t=t",
			"https://127.0.0.1:1/subscriptions/s/providers/Microsoft.Compute/locations/EastUS2/DiskOperations/abc?api-version=2025-01-02&p=11111111-1111-1111-1111-111111111111"},
	} {
		if URLShape(c.a) != URLShape(c.b) {
			t.Errorf("shapes differ:\n %s\n %s", URLShape(c.a), URLShape(c.b))
		}
	}
	for _, c := range []struct{ a, b string }{
		{"https://x/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/1?api-version=2025-04-01",
			"https://x/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operationResults/1?api-version=2025-04-01"},
		{"https://x/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/1?api-version=2025-04-01&monitor=true",
			"https://x/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/1?api-version=2025-04-01"},
		{"https://x/subscriptions/s/providers/Microsoft.Compute/locations/eastus/operations/1?api-version=2025-04-01",
			"https://x/subscriptions/s/providers/Microsoft.Compute/locations/westus/operations/1?api-version=2025-04-01"},
	} {
		if URLShape(c.a) == URLShape(c.b) {
			t.Errorf("shapes equal: %s", URLShape(c.a))
		}
	}
}

func TestCompareETags(t *testing.T) {
	h := func(v string) http.Header { return http.Header{"Etag": []string{v}} }
	rec := map[string][]string{"Etag": {`"2"`}}
	if d := CompareETags("GET", rec, `{"etag":"\"2\""}`, h(`"2"`), `{"etag":"\"2\""}`); len(d) != 0 {
		t.Errorf("equal counters: %v", d)
	}
	if d := CompareETags("GET", rec, `{"etag":"\"2\""}`, h(`"1"`), `{"etag":"\"1\""}`); len(d) != 2 {
		t.Errorf("different counters: %v", d)
	}
	weak := map[string][]string{"Etag": {`W/"00000000-0000-0000-0000-000000000000"`}}
	if d := CompareETags("GET", weak, "", h(`W/"0c1b2a3d-1111-4222-8333-944445555666"`), ""); len(d) != 0 {
		t.Errorf("weak GUID shape: %v", d)
	}
	if d := CompareETags("GET", weak, "", h(`"1"`), ""); len(d) != 1 {
		t.Errorf("counter for a weak GUID: %v", d)
	}
	if d := CompareETags("PUT", nil, "", h(`W/"0c1b2a3d-1111-4222-8333-944445555666"`), ""); len(d) != 1 {
		t.Errorf("extra header on a write: %v", d)
	}
	if d := CompareETags("GET", rec, `{"etag":"\"2\""}`, h(`"2"`), `{"etag":"\"3\""}`); len(d) < 2 {
		t.Errorf("header and body disagree: %v", d)
	}
}

func TestResourceType(t *testing.T) {
	for path, want := range map[string]string{
		"/subscriptions/s/resourcegroups/rg?api-version=2021-04-01":                                                                "Microsoft.Resources/resourceGroups",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm":                                        "Microsoft.Compute/virtualMachines",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines?api-version=1":                             "Microsoft.Compute/virtualMachines",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0":              "Microsoft.Compute/virtualMachineScaleSets/virtualMachines",
		"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/ss/virtualMachines/0/instanceView": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines/instanceView",
		"/subscriptions/s/providers/Microsoft.Compute/locations/eastus2/DiskOperations/id":                                         "Microsoft.Compute/locations/DiskOperations",
	} {
		if got := ResourceType(path); got != want {
			t.Errorf("ResourceType(%s) = %q, want %q", path, got, want)
		}
	}
}

func TestBodyDifferences(t *testing.T) {
	const path = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/publicIPAddresses"
	want := `{"value":[{"name":"a","properties":{"ipAddress":"1.2.3.4","dns":{"fqdn":"x"}}}]}`
	got := `{"value":[{"name":"b","properties":{"dns":{},"idleTimeoutInMinutes":4}}]}`
	d := BodyDifferences(path, want, got)
	exp := []string{
		"Microsoft.Network/publicIPAddresses extra .properties.idleTimeoutInMinutes",
		"Microsoft.Network/publicIPAddresses missing .properties.dns.fqdn",
		"Microsoft.Network/publicIPAddresses missing .properties.ipAddress",
	}
	if fmt.Sprint(d) != fmt.Sprint(exp) {
		t.Errorf("differences %v, want %v", d, exp)
	}
	if d := BodyDifferences(path, want, want); len(d) != 0 {
		t.Errorf("equal bodies differ: %v", d)
	}
}

// errorsTB records Errorf.
type errorsTB struct {
	testing.TB
	errs []string
}

func (t *errorsTB) Helper() {}
func (t *errorsTB) Errorf(format string, a ...any) {
	t.errs = append(t.errs, fmt.Sprintf(format, a...))
}

func TestCheckBodyDifferencesReportsStaleEntries(t *testing.T) {
	listed := map[string]string{"T missing .a": "why", "T extra .b": "why"}
	f := &errorsTB{TB: t}
	CheckBodyDifferences(f, listed, map[string]bool{"T missing .a": true, "T extra .c": true})
	if len(f.errs) != 1 || !strings.Contains(f.errs[0], "T extra .b") {
		t.Errorf("errors %q, want one naming the stale entry", f.errs)
	}
}
