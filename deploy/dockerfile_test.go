package deploy

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestDockerfiles checks what can be checked without a container runtime: each binary's
// Dockerfile builds that binary from the directories it copies (every package of this module
// the binary links lives under one of them), runs it on distroless static as non-root, and its
// entrypoint is the command the chart runs.
func TestDockerfiles(t *testing.T) {
	root := framework.RepoRoot()
	// The chart's templates name the command of every binary (the disk provisioner's is not in
	// the default rendering).
	manifests := ""
	for _, f := range []string{"ccm-deployment.yaml", "node-manager-daemonset.yaml", "disk-provisioner.yaml"} {
		b, err := os.ReadFile(filepath.Join(root, "deploy", "chart", "azure-ccm", "templates", f))
		if err != nil {
			t.Fatal(err)
		}
		manifests += string(b)
	}
	copied := regexp.MustCompile(`(?m)^COPY (\S+)/ \S+/?$`)
	for _, bin := range []string{"azure-cloud-controller-manager", "azure-cloud-node-manager", "azure-disk-provisioner"} {
		b, err := os.ReadFile(filepath.Join(root, "build", bin, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		df := string(b)
		var froms []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if f, ok := strings.CutPrefix(sc.Text(), "FROM "); ok {
				froms = append(froms, f)
			}
		}
		if len(froms) < 2 || !strings.HasPrefix(froms[0], "--platform=$BUILDPLATFORM golang:") ||
			froms[len(froms)-1] != "gcr.io/distroless/static:nonroot" {
			t.Errorf("%s: stages %v, want golang → gcr.io/distroless/static:nonroot", bin, froms)
		}
		for _, want := range []string{"CGO_ENABLED=0", "./cmd/" + bin, "USER 65532:65532", `ENTRYPOINT ["/` + bin + `"]`} {
			if !strings.Contains(df, want) {
				t.Errorf("%s: Dockerfile lacks %q", bin, want)
			}
		}
		if !strings.Contains(manifests, "command: [/"+bin+"]") {
			t.Errorf("%s: the chart does not run /%s", bin, bin)
		}
		dirs := map[string]bool{}
		for _, m := range copied.FindAllStringSubmatch(df, -1) {
			dirs[m[1]] = true
		}
		out, err := exec.Command("go", "list", "-C", root, "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/"+bin).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		for _, dir := range strings.Fields(string(out)) {
			rel, _ := filepath.Rel(root, dir)
			if top := strings.Split(rel, string(filepath.Separator))[0]; !dirs[top] {
				t.Errorf("%s links %s, which its Dockerfile does not COPY", bin, rel)
			}
		}
	}
}
