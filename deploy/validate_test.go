package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// Env of hack/verify-deploy.sh: the kubeconform binary and the chart renderings to check
// (separated by ':'), besides deploy/manifests.
const (
	envKubeconform = "AZURE_CCM_KUBECONFORM"
	envRendered    = "AZURE_CCM_RENDERED"
)

// manifestFiles are the files to validate: deploy/manifests and the renderings given by
// hack/verify-deploy.sh.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(framework.RepoRoot(), "deploy", "manifests", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/manifests (%v)", err)
	}
	for _, f := range filepath.SplitList(os.Getenv(envRendered)) {
		if f != "" {
			files = append(files, f)
		}
	}
	return files
}

// kindsIn lists the (apiVersion, kind) pairs of every object in the files.
func kindsIn(t *testing.T, files []string) [][2]string {
	t.Helper()
	seen := map[[2]string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var u unstructured.Unstructured
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			seen[[2]string{u.GetAPIVersion(), u.GetKind()}] = true
		}
	}
	out := make([][2]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+out[i][1] < out[j][0]+out[j][1] })
	return out
}

// TestManifestsValidate checks every object of the chart against the API of the pinned
// Kubernetes version, twice: kubeconform -strict with schemas generated from the local
// kube-apiserver's OpenAPI (no schema download is possible here), and a server-side dry-run
// apply (admission, defaulting, references to built-in roles).
func TestManifestsValidate(t *testing.T) {
	kubeconform := os.Getenv(envKubeconform)
	if kubeconform == "" {
		kubeconform = filepath.Join(framework.ToolsDir(), "kubeconform")
	}
	if _, err := os.Stat(kubeconform); err != nil {
		if framework.InCI() {
			t.Fatalf("kubeconform missing (hack/verify-deploy.sh installs it): %v", err)
		}
		t.Skipf("kubeconform missing (run hack/verify-deploy.sh): %v", err)
	}
	files := manifestFiles(t)
	kinds := kindsIn(t, files)
	e := framework.Start(t, framework.Options{NoAzure: true})
	raw, err := e.Kube.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("openapi v2: %v", err)
	}
	sw, err := ParseSwagger(raw)
	if err != nil {
		t.Fatal(err)
	}
	schemas := filepath.Join(t.TempDir(), "schemas")
	if err := sw.WriteSchemas(schemas, kinds); err != nil {
		t.Fatal(err)
	}
	t.Logf("schemas for %d kinds from %s's OpenAPI", len(kinds), framework.PinnedVersions()["KUBERNETES_VERSION"])

	run := func(files ...string) (string, error) {
		args := append([]string{"-strict", "-summary", "-schema-location", SchemaLocation(schemas)}, files...)
		out, err := exec.Command(kubeconform, args...).CombinedOutput()
		return string(out), err
	}
	out, err := run(files...)
	if err != nil {
		t.Fatalf("kubeconform: %v\n%s", err, out)
	}
	t.Logf("kubeconform: %s", strings.TrimSpace(out))

	// The schemas are not vacuous: a misspelt field and a wrong type are rejected.
	for name, mutate := range map[string]func(string) string{
		"unknown field": func(s string) string { return strings.Replace(s, "serviceAccountName:", "serviceAcountName:", 1) },
		"wrong type":    func(s string) string { return strings.Replace(s, "replicas: 2", "replicas: two", 1) },
	} {
		b, err := os.ReadFile(filepath.Join(framework.RepoRoot(), "deploy", "manifests", "ccm-deployment.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		bad := mutate(string(b))
		if bad == string(b) {
			t.Fatalf("%s: the mutation did not apply", name)
		}
		p := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(p, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := run(p); err == nil {
			t.Errorf("kubeconform accepted a manifest with a %s:\n%s", name, out)
		}
	}

	for _, f := range files {
		cmd := exec.Command(e.Tools.Kubectl, "--kubeconfig", e.Kubeconfig, "apply", "--dry-run=server",
			"--validate=strict", "-f", f)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("kubectl apply --dry-run=server -f %s: %v\n%s", f, err, out)
		}
	}
}
