package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// existingProvider is deploy/compat/existing-provider.json: the names the existing provider
// accepts or produces, each group with the upstream file it was read from.
type existingProvider struct {
	About  string
	Source struct {
		Repository, Tag, Commit string
	}
	AzureJSON struct {
		Structs []struct {
			From, Struct string
			// Parent is the key holding these keys ("" at the top level).
			Parent string
			// Note says what of the struct is left out, and why.
			Note string
			Keys []string
		}
		PerClientRateLimit struct {
			From string
			Keys []string
		}
	}
	Annotations struct {
		From, Note, Prefix string
		Names              []string
	}
	NodeManagerFlags []struct {
		From string
		// OS names the only GOOS that registers the flags ("" for every one).
		OS    string
		Flags []string
	}
	NodeLabels struct {
		Set, Read struct {
			From   string
			Labels []string
		}
	}
	Metrics struct {
		From  string
		Names []string
	}
}

func loadExistingProvider(t *testing.T) existingProvider {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "deploy", "compat", "existing-provider.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p existingProvider
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("deploy/compat/existing-provider.json: %v", err)
	}
	if p.Source.Repository == "" || p.Source.Tag == "" || p.Source.Commit == "" {
		t.Fatal("deploy/compat/existing-provider.json does not say which upstream source it was read from")
	}
	return p
}

// atLeast fails when a group of the table has fewer entries than it had when it was read: an
// entry deleted from the table would otherwise pass unnoticed.
func atLeast(t *testing.T, group string, got, want int) {
	t.Helper()
	if got < want {
		t.Errorf("the table's %s has %d entries, fewer than the %d read from upstream: entries were deleted", group, got, want)
	}
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the part of doc from the heading line to the next heading of its level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no section %q", heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	if i := strings.Index(rest, "\n"+level); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// strictKeyError decodes doc into config.Config refusing fields no struct field reads, the
// way encoding/json matches them (case-insensitively, nested structs included).
func strictKeyError(doc string) error {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	var c config.Config
	return dec.Decode(&c)
}

// TestCompatAzureJSONKeys: every azure.json key of the existing provider is read by the
// config parser (no struct field misses it, and the binaries do not warn about it as
// unknown), or refused with an error naming it; and docs/configuration.md has a row for it
// (nested keys: named in the row of the key holding them). Whether a documented key acts or
// is inert is TestConfigFieldsReadOrAccepted's check.
func TestCompatAzureJSONKeys(t *testing.T) {
	p := loadExistingProvider(t)
	rows := map[string]keyRow{}
	for _, r := range keyRows(t, readDoc(t, "configuration.md")) {
		for _, k := range r.keys {
			rows[k] = r
		}
	}
	n := 0
	for _, s := range p.AzureJSON.Structs {
		for _, key := range s.Keys {
			n++
			item := fmt.Sprintf("azure.json key %q (upstream %s %s)", key, s.Struct, s.From)
			doc := fmt.Sprintf("{%q: null}", key)
			if s.Parent != "" {
				item = fmt.Sprintf("azure.json key %q of %q (upstream %s %s)", key, s.Parent, s.Struct, s.From)
				inner := doc
				if s.Parent == "multipleStandardLoadBalancerConfigurations" {
					inner = "[" + doc + "]"
				}
				doc = fmt.Sprintf("{%q: %s}", s.Parent, inner)
			}
			read := strictKeyError(doc) == nil
			if read && s.Parent == "" {
				unknown, err := config.UnknownKeys([]byte(doc))
				if err != nil {
					t.Fatalf("%s: %v", item, err)
				}
				read = len(unknown) == 0
			}
			if !read {
				_, err := config.Parse([]byte(doc), nil)
				if err == nil || !strings.Contains(err.Error(), key) {
					t.Errorf("%s: internal/config neither reads it nor refuses it by name (Parse: %v)", item, err)
				}
			}
			if s.Parent == "" {
				if _, ok := rows[strings.ToLower(key)]; !ok {
					t.Errorf("%s: no row of the key tables of docs/configuration.md names it", item)
				}
				continue
			}
			parent, ok := rows[strings.ToLower(s.Parent)]
			if !ok || !regexp.MustCompile(`\b`+regexp.QuoteMeta(key)+`\b`).MatchString(parent.line) {
				t.Errorf("%s: the row of %q in docs/configuration.md does not name it", item, s.Parent)
			}
		}
	}
	atLeast(t, "azure.json keys", n, 98)

	// Per-client rate limit objects: the existing provider reads them into a map of its
	// rate-limit config; here they are accepted without a warning and documented as a family.
	ratelimitRow, ok := rows["cloudproviderratelimit"]
	documented := ok && strings.Contains(ratelimitRow.line, "Per-client `…RateLimit` objects")
	for _, key := range p.AzureJSON.PerClientRateLimit.Keys {
		item := fmt.Sprintf("per-client rate limit key %q (upstream %s)", key, p.AzureJSON.PerClientRateLimit.From)
		unknown, err := config.UnknownKeys([]byte(fmt.Sprintf(`{%q: {"cloudProviderRateLimitQPS": 1}}`, key)))
		if err != nil || len(unknown) > 0 {
			t.Errorf("%s: the binaries warn about it as unknown (%v %v)", item, unknown, err)
		}
		if !documented {
			t.Errorf("%s: the cloudProviderRateLimit row of docs/configuration.md does not document per-client `…RateLimit` objects", item)
		}
	}
	atLeast(t, "per-client rate limit keys", len(p.AzureJSON.PerClientRateLimit.Keys), 20)
}

// annotationConsts are the string constants of internal/loadbalancer/annotations.
func annotationConsts(t *testing.T) map[string]bool {
	t.Helper()
	dir := filepath.Join(framework.RepoRoot(), "internal", "loadbalancer", "annotations")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out := map[string]bool{}
	for _, v := range stringConsts(files) {
		out[v] = true
	}
	return out
}

// TestCompatServiceAnnotations: every Service annotation the existing provider reads is a key
// of internal/loadbalancer/annotations (per-port ones: what its key functions build for a
// port) and has a row in docs/annotations.md.
func TestCompatServiceAnnotations(t *testing.T) {
	p := loadExistingProvider(t)
	consts := annotationConsts(t)
	const port = 8443
	perPort := map[string]bool{
		annotations.PortNoLBRuleKey(port):    true,
		annotations.PortNoProbeRuleKey(port): true,
	}
	for _, param := range []string{annotations.PortProbeProtocol, annotations.PortProbePort, annotations.PortProbeInterval,
		annotations.PortProbeNumOfProbe, annotations.PortProbeRequestPath} {
		perPort[annotations.PortProbeKey(port, param)] = true
	}
	doc := readDoc(t, "annotations.md")
	for _, name := range p.Annotations.Names {
		item := fmt.Sprintf("annotation %s%s (upstream %s)", p.Annotations.Prefix, name, p.Annotations.From)
		full := p.Annotations.Prefix + strings.ReplaceAll(name, "{port}", fmt.Sprint(port))
		if strings.Contains(name, "{port}") {
			if !perPort[full] {
				t.Errorf("%s: internal/loadbalancer/annotations builds no such per-port key (port %d: %s)", item, port, full)
			}
		} else if !consts[full] {
			t.Errorf("%s: not a key of internal/loadbalancer/annotations", item)
		}
		row := "| `" + strings.ReplaceAll(name, "{port}", "<port>") + "` |"
		if !strings.Contains(doc, row) {
			t.Errorf("%s: docs/annotations.md has no row %q", item, row)
		}
	}
	atLeast(t, "annotations", len(p.Annotations.Names), 45)
}

// nodeManagerHelp builds the node manager and returns the flags its --help lists.
func nodeManagerHelp(t *testing.T) map[string]bool {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "azure-cloud-node-manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/azure-cloud-node-manager")
	build.Dir = framework.RepoRoot()
	build.Env = makeBuildEnv()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	help := exec.Command(bin, "--help")
	help.Stdout, help.Stderr = &stdout, &stderr
	if err := help.Run(); err != nil {
		t.Fatalf("azure-cloud-node-manager --help: %v\n%s", err, stderr.String())
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-[a-z], )?--([a-z0-9-]+)`).FindAllStringSubmatch(stdout.String(), -1) {
		flags[m[1]] = true
	}
	if len(flags) < 20 {
		t.Fatalf("--help lists only %d flags: the parse is broken\n%s", len(flags), stdout.String())
	}
	return flags
}

// osOnlyFlag reports whether a flag registration for name is in the node manager's files
// built only for goos: its own, or internal/windowsservice's.
func osOnlyFlag(t *testing.T, goos, name string) bool {
	t.Helper()
	var files []string
	for _, dir := range []string{"cmd/azure-cloud-node-manager", "internal/windowsservice"} {
		fs, err := filepath.Glob(filepath.Join(framework.RepoRoot(), dir, "*_"+goos+".go"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(fmt.Sprintf("%q", name))) {
			return true
		}
	}
	return false
}

// TestCompatNodeManagerFlags: the node manager accepts every flag of the existing one (its
// --help lists it; a flag registered only on Windows is registered in the Windows-only file),
// and the node manager section of docs/nodes-and-zones.md names it.
func TestCompatNodeManagerFlags(t *testing.T) {
	p := loadExistingProvider(t)
	accepted := nodeManagerHelp(t)
	doc := section(t, readDoc(t, "nodes-and-zones.md"), "## azure-cloud-node-manager")
	n := 0
	for _, g := range p.NodeManagerFlags {
		for _, name := range g.Flags {
			n++
			item := fmt.Sprintf("node manager flag --%s (upstream %s)", name, g.From)
			switch {
			case g.OS != "" && !osOnlyFlag(t, g.OS, name):
				t.Errorf("%s: no *_%s.go file of cmd/azure-cloud-node-manager or internal/windowsservice registers it", item, g.OS)
			case g.OS == "" && !accepted[name]:
				t.Errorf("%s: azure-cloud-node-manager --help does not list it", item)
			}
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `([^a-z0-9-]|$)`).MatchString(doc) {
				t.Errorf("%s: the azure-cloud-node-manager section of docs/nodes-and-zones.md does not name it", item)
			}
		}
	}
	atLeast(t, "node manager flags", n, 46)
}

// goSourcesContain reports whether a non-test Go file under internal/ or cmd/ holds the
// string literal s.
func goSourcesContain(t *testing.T, s string) bool {
	t.Helper()
	root := framework.RepoRoot()
	lit := []byte(fmt.Sprintf("%q", s))
	found := false
	walkSources(t, root, func(rel, path string) {
		if found || !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") ||
			!(strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "cmd/")) {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		found = bytes.Contains(b, lit)
	})
	return found
}

// TestCompatNodeLabels: the node manager sets every label the existing one sets (the labels
// nodes.ApplyMetadata writes for a VM whose metadata has every value, beta labels on), the
// code reads every node label the existing provider reads, and docs/nodes-and-zones.md names
// each.
func TestCompatNodeLabels(t *testing.T) {
	p := loadExistingProvider(t)
	doc := readDoc(t, "nodes-and-zones.md")
	md := nodes.NodeMetadata{
		ProviderID: "azure:///subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm0",
		Zone:       "eastus-1", Region: "eastus", InstanceType: "Standard_D2s_v3",
		SubFaultDomain: "1", InterconnectGroup: "group-1",
	}
	node, _, _ := nodes.ApplyMetadata(&v1.Node{}, md, nodes.InitOptions{BetaLabels: true})
	for _, l := range p.NodeLabels.Set.Labels {
		item := fmt.Sprintf("node label %s (upstream %s)", l, p.NodeLabels.Set.From)
		if node.Labels[l] == "" {
			t.Errorf("%s: nodes.ApplyMetadata does not set it (it set %v)", item, sortedKeys(node.Labels))
		}
		if !strings.Contains(doc, "`"+l+"`") {
			t.Errorf("%s: docs/nodes-and-zones.md does not name it", item)
		}
	}
	for _, l := range p.NodeLabels.Read.Labels {
		item := fmt.Sprintf("node label %s (upstream %s)", l, p.NodeLabels.Read.From)
		if !goSourcesContain(t, l) {
			t.Errorf("%s: no Go source under internal/ or cmd/ names it", item)
		}
		if !strings.Contains(doc, "`"+l) {
			t.Errorf("%s: docs/nodes-and-zones.md does not name it", item)
		}
	}
	atLeast(t, "node labels", len(p.NodeLabels.Set.Labels)+len(p.NodeLabels.Read.Labels), 14)
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCompatMetrics: every metric of the existing provider is defined by the code linked into
// the binaries and documented in docs/operations.md.
func TestCompatMetrics(t *testing.T) {
	p := loadExistingProvider(t)
	defined := codeDefs(t).MetricNames()
	doc := readDoc(t, "operations.md")
	for _, name := range p.Metrics.Names {
		item := fmt.Sprintf("metric %s (upstream %s)", name, p.Metrics.From)
		if _, ok := defined[name]; !ok {
			t.Errorf("%s: no code linked into the binaries defines it", item)
		}
		if !documented(doc, name) {
			t.Errorf("%s: docs/operations.md does not name it", item)
		}
	}
	atLeast(t, "metrics", len(p.Metrics.Names), 6)
}
