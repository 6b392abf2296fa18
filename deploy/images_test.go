package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/imagebuild"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestChartRunsTheImages checks the chart against the images `make images` builds
// (internal/imagebuild): each Linux binary's image has the entrypoint the chart runs as its
// command, and runs as the uid the chart's pod security context sets.
func TestChartRunsTheImages(t *testing.T) {
	root := framework.RepoRoot()
	templates := filepath.Join(root, "deploy", "chart", "azure-ccm", "templates")
	for bin, file := range map[string]string{
		"azure-cloud-controller-manager": "ccm-deployment.yaml",
		"azure-cloud-node-manager":       "node-manager-daemonset.yaml",
		"azure-disk-provisioner":         "disk-provisioner.yaml",
	} {
		b, err := os.ReadFile(filepath.Join(templates, file))
		if err != nil {
			t.Fatal(err)
		}
		tpl := string(b)
		img, err := imagebuild.Image(imagebuild.Binary{Name: bin, OS: "linux", Arch: "amd64", Content: []byte("x")},
			imagebuild.Meta{Created: time.Unix(0, 0)})
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if want := "command: [" + strings.Join(cf.Config.Entrypoint, ", ") + "]"; !strings.Contains(tpl, want) {
			t.Errorf("%s: the chart does not run the image's entrypoint (%s)", file, want)
		}
		uid, gid, _ := strings.Cut(cf.Config.User, ":")
		for _, want := range []string{"runAsNonRoot: true", "runAsUser: " + uid, "runAsGroup: " + gid} {
			if !strings.Contains(tpl, want) {
				t.Errorf("%s lacks %q (the image's user is %s)", file, want, cf.Config.User)
			}
		}
	}
}
