// Command images builds the project's container images (`make images`) without a daemon or a
// base image: for each command it builds static linux binaries per platform, wraps each in an
// image made by internal/imagebuild, and writes under the output directory
//
//	<name>/oci/                       an OCI layout holding the multi-arch index, tagged
//	<name>/<name>-linux-<arch>.tar    a docker-archive of the host's platform (podman/docker load)
//	<name>/sbom-linux-<arch>.spdx.json  the SPDX SBOM of each platform's binary
//	digests.txt                       <repository>:<tag>@<index digest>, one per image
//	values.yaml                       chart values pinning every image to its digest
//
// Everything derives from the commit and SOURCE_DATE_EPOCH (default: the commit time), so two
// clean checkouts of one commit give the same digests.
//
// Env: REGISTRY (default ghcr.io/azure-ccm), VERSION (default v<chart appVersion>-g<commit>),
// SOURCE_DATE_EPOCH, PLATFORMS (default linux/amd64,linux/arm64), IMAGES_OUTPUT
// (default _output/images), GO (default go).
package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/azure-ccm/azure-ccm/internal/imagebuild"
)

// commands are the images built, each named after its cmd/ directory; chartKey is the chart
// values key of its image ("" when the chart does not run it).
func commands() []struct{ name, chartKey string } {
	return []struct{ name, chartKey string }{
		{"azure-cloud-controller-manager", "ccm"},
		{"azure-cloud-node-manager", "nodeManager"},
		{"azure-disk-provisioner", "diskProvisioner"},
		{"azsim", ""},
	}
}

const source = "https://github.com/azure-ccm/azure-ccm"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func run() error {
	start := time.Now()
	goBin := env("GO", "go")
	out := env("IMAGES_OUTPUT", filepath.Join("_output", "images"))
	registry := env("REGISTRY", "ghcr.io/azure-ccm")
	revision, err := git("rev-parse", "HEAD")
	if err != nil {
		return err
	}
	status, err := git("status", "--porcelain")
	if err != nil {
		return err
	}
	treeState := "clean"
	if status != "" {
		treeState = "dirty"
	}
	epoch := os.Getenv("SOURCE_DATE_EPOCH")
	if epoch == "" {
		if epoch, err = git("log", "-1", "--format=%ct"); err != nil {
			return err
		}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
	}
	created := time.Unix(secs, 0).UTC()
	version := os.Getenv("VERSION")
	if version == "" {
		app, err := chartAppVersion()
		if err != nil {
			return err
		}
		version = "v" + app + "-g" + revision[:12]
		if treeState == "dirty" {
			version += "-dirty"
		}
	}
	// An image tag cannot hold "+", which semver build metadata would use.
	tag := strings.ReplaceAll(strings.TrimPrefix(version, "v"), "+", "-")
	meta := imagebuild.Meta{Source: source, Revision: revision, Version: version, Created: created}
	platforms := strings.Split(env("PLATFORMS", "linux/amd64,linux/arm64"), ",")

	if err := os.RemoveAll(out); err != nil {
		return err
	}
	binDir := filepath.Join(out, ".bin")
	// The version stamps k8s.io/component-base reports for --version and in its metrics.
	const v = "k8s.io/component-base/version"
	ldflags := strings.Join([]string{"-s", "-w",
		"-X", v + ".gitVersion=" + version,
		"-X", v + ".gitCommit=" + revision,
		"-X", v + ".gitTreeState=" + treeState,
		"-X", v + ".buildDate=" + created.Format(time.RFC3339),
	}, " ")
	var pkgs []string
	for _, c := range commands() {
		pkgs = append(pkgs, "./cmd/"+c.name)
	}
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return fmt.Errorf("platform %q: want os/arch", p)
		}
		dir := filepath.Join(binDir, goos+"-"+goarch)
		cmd := exec.Command(goBin, append([]string{"build", "-trimpath", "-ldflags", ldflags, "-o", dir + "/"}, pkgs...)...) //nolint:gosec // G204: $GO is the toolchain the developer chose
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		fmt.Printf("building %s for %s\n", strings.Join(pkgs, " "), p)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go build for %s: %w", p, err)
		}
	}

	hostPlatform := runtime.GOOS + "/" + runtime.GOARCH
	var digests bytes.Buffer
	values := map[string]any{}
	for _, c := range commands() {
		repo := registry + "/" + c.name
		dir := filepath.Join(out, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: build outputs are for everyone to read
			return err
		}
		var imgs []v1.Image
		for _, p := range platforms {
			goos, goarch, _ := strings.Cut(p, "/")
			binPath := filepath.Join(binDir, goos+"-"+goarch, c.name)
			img, err := buildImage(c.name, goos, goarch, binPath, meta, dir)
			if err != nil {
				return err
			}
			imgs = append(imgs, img)
			if p == hostPlatform {
				ref, err := name.NewTag(repo + ":" + tag)
				if err != nil {
					return err
				}
				if err := tarball.WriteToFile(filepath.Join(dir, c.name+"-"+goos+"-"+goarch+".tar"), ref, img); err != nil {
					return err
				}
			}
		}
		idx, err := imagebuild.Index(imgs, meta)
		if err != nil {
			return err
		}
		lp, err := layout.Write(filepath.Join(dir, "oci"), empty.Index)
		if err != nil {
			return err
		}
		if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": tag,
		})); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(&digests, "%s:%s@%s\n", repo, tag, d)
		if c.chartKey != "" {
			values[c.chartKey] = map[string]any{"image": map[string]string{"repository": repo, "tag": tag, "digest": d.String()}}
		}
	}
	if err := os.RemoveAll(binDir); err != nil {
		return err
	}
	if err := writeOutput(filepath.Join(out, "digests.txt"), digests.Bytes()); err != nil {
		return err
	}
	vb, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	header := "# Chart values for the images `make images` built (helm install -f this file).\n"
	if err := writeOutput(filepath.Join(out, "values.yaml"), append([]byte(header), vb...)); err != nil {
		return err
	}
	fmt.Print(digests.String())
	fmt.Printf("images built in %s (%s, SOURCE_DATE_EPOCH=%d) under %s\n", time.Since(start).Round(time.Second), version, secs, out)
	return nil
}

// buildImage makes one platform's image of the binary at binPath and writes its SBOM to dir.
func buildImage(cmdName, goos, goarch, binPath string, meta imagebuild.Meta, dir string) (v1.Image, error) {
	content, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	bi, err := buildinfo.Read(bytes.NewReader(content))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", binPath, err)
	}
	sum := sha256.Sum256(content)
	sbom, err := imagebuild.SPDX(cmdName, bi, hex.EncodeToString(sum[:]), meta.Created)
	if err != nil {
		return nil, err
	}
	if err := writeOutput(filepath.Join(dir, "sbom-"+goos+"-"+goarch+".spdx.json"), sbom); err != nil {
		return nil, err
	}
	return imagebuild.Image(imagebuild.Binary{Name: cmdName, OS: goos, Arch: goarch, Content: content}, meta)
}

func chartAppVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join("deploy", "chart", "azure-ccm", "Chart.yaml"))
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", err
	}
	if chart.AppVersion == "" {
		return "", errors.New("chart has no appVersion")
	}
	return chart.AppVersion, nil
}

func git(args ...string) (string, error) {
	b, err := exec.Command("git", args...).Output() //nolint:gosec // G204: the arguments are this program's own
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(b)), nil
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// writeOutput writes a build output, readable by everyone like the rest of _output.
func writeOutput(path string, b []byte) error {
	return os.WriteFile(path, b, 0o644) //nolint:gosec // G306: build outputs are for everyone to read
}
