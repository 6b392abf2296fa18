//go:build images

// Package images runs the images `make images` built in a real container runtime (podman with
// runc), hardened as the chart runs them: read-only root filesystem, every capability dropped,
// the image's own non-root user. A missing runtime or image fails the test: `make test-images`
// installs podman and builds the images first.
package images

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// podman runs podman with the options this machine needs (runc: crun is refused; cgroupfs: no
// systemd; explicit ulimits: the defaults are refused).
func podman(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "podman", append([]string{"--runtime", "runc", "--cgroup-manager=cgroupfs"}, args...)...)
}

// hardened are the run options every container gets: what the chart sets (read-only root,
// no capabilities, no privilege escalation) plus this machine's limits.
func hardened(network string) []string {
	return []string{"run", "--rm", "--network=" + network, "--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL",
		"--security-opt=no-new-privileges", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}
}

type image struct {
	name string // command name
	ref  string // repository:tag as loaded
}

// loadImages loads every docker-archive of the host platform and returns the images by name.
func loadImages(ctx context.Context, t *testing.T) map[string]image {
	t.Helper()
	out := filepath.Join(framework.RepoRoot(), "_output", "images")
	f, err := os.Open(filepath.Join(out, "digests.txt"))
	if err != nil {
		t.Fatalf("no images (run make images): %v", err)
	}
	defer func() { _ = f.Close() }()
	imgs := map[string]image{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ref, _, _ := strings.Cut(sc.Text(), "@")
		repo, _, _ := strings.Cut(ref, ":")
		name := repo[strings.LastIndex(repo, "/")+1:]
		archive := filepath.Join(out, name, name+"-linux-"+hostArch(t)+".tar")
		if b, err := podman(ctx, "load", "-i", archive).CombinedOutput(); err != nil {
			t.Fatalf("podman load %s: %v\n%s", archive, err, b)
		}
		imgs[name] = image{name: name, ref: ref}
	}
	for _, want := range []string{"azure-cloud-controller-manager", "azure-cloud-node-manager", "azure-disk-provisioner", "azsim"} {
		if _, ok := imgs[want]; !ok {
			t.Fatalf("digests.txt has no %s image", want)
		}
	}
	return imgs
}

func hostArch(t *testing.T) string {
	b, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type imageConfig struct {
	Config struct {
		User       string
		Entrypoint []string
		Labels     map[string]string
	}
}

func inspect(ctx context.Context, t *testing.T, ref string) imageConfig {
	t.Helper()
	b, err := podman(ctx, "image", "inspect", ref).Output()
	if err != nil {
		t.Fatalf("podman image inspect %s: %v", ref, err)
	}
	var cfgs []imageConfig
	if err := json.Unmarshal(b, &cfgs); err != nil || len(cfgs) != 1 {
		t.Fatalf("podman image inspect %s: %v %s", ref, err, b)
	}
	return cfgs[0]
}

// TestImagesRunHardened: each image's config runs it as 65532 with the labels, and --version
// and --help work in a read-only container without capabilities or network.
func TestImagesRunHardened(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, img := range loadImages(ctx, t) {
		t.Run(img.name, func(t *testing.T) {
			cfg := inspect(ctx, t, img.ref)
			if cfg.Config.User != "65532:65532" {
				t.Errorf("%s runs as %q, want 65532:65532", img.ref, cfg.Config.User)
			}
			if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/"+img.name {
				t.Errorf("%s entrypoint %q, want /%s", img.ref, got, img.name)
			}
			version := cfg.Config.Labels["org.opencontainers.image.version"]
			for _, l := range []string{"source", "revision", "version", "created"} {
				if cfg.Config.Labels["org.opencontainers.image."+l] == "" {
					t.Errorf("%s has no label org.opencontainers.image.%s", img.ref, l)
				}
			}
			versionArg := "--version"
			if img.name == "azsim" {
				versionArg = "version"
			}
			out, err := podman(ctx, append(hardened("none"), img.ref, versionArg)...).CombinedOutput()
			if err != nil || !strings.Contains(string(out), version) {
				t.Errorf("%s %s: %v, output %q, want the version %q", img.ref, versionArg, err, out, version)
			} else {
				t.Logf("%s %s: %s", img.name, versionArg, strings.TrimSpace(string(out)))
			}
			out, err = podman(ctx, append(hardened("none"), img.ref, "--help")...).CombinedOutput()
			if err != nil || !strings.Contains(strings.ToLower(string(out)), "usage") {
				t.Errorf("%s --help: %v, output %.300q", img.ref, err, out)
			}
		})
	}
}

// TestAzsimImageTLS runs the azsim image as a server on the host network and its client from a
// second container: the server really runs as 65532 without capabilities (read from the
// kernel), and the client trusts the server's CA only through the system pool (SSL_CERT_FILE),
// which the same request without it shows.
func TestAzsimImageTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	img := loadImages(ctx, t)["azsim"]
	dir := t.TempDir()
	// The server, uid 65532, writes its CA here.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	name := fmt.Sprintf("azsim-image-test-%d", port)
	run := append(hardened("host"), "-d", "--name", name, "-v", dir+":/data", img.ref,
		"serve", "--addr", addr, "--imds-addr", "off", "--dir", "/data")
	if b, err := podman(ctx, run...).CombinedOutput(); err != nil {
		t.Fatalf("podman run azsim serve: %v\n%s", err, b)
	}
	defer func() {
		if b, err := podman(context.Background(), "rm", "-f", "-t", "0", name).CombinedOutput(); err != nil {
			t.Logf("podman rm %s: %v %s", name, err, b)
		}
	}()
	bundle := filepath.Join(dir, "ca-bundle.pem")
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			if _, err := os.Stat(bundle); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			logs, _ := podman(ctx, "logs", name).CombinedOutput()
			t.Fatalf("azsim in the container is not serving on %s with %s after a minute; logs:\n%s", addr, bundle, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	pidOut, err := podman(ctx, "inspect", "--format", "{{.State.Pid}}", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile("/proc/" + strings.TrimSpace(string(pidOut)) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	if fields["Uid"] != "65532 65532 65532 65532" || fields["Gid"] != "65532 65532 65532 65532" {
		t.Errorf("azsim runs as Uid %q Gid %q, want 65532 everywhere", fields["Uid"], fields["Gid"])
	}
	for _, c := range []string{"CapEff", "CapPrm", "CapBnd"} {
		if fields[c] != "0000000000000000" {
			t.Errorf("azsim %s %s, want none", c, fields[c])
		}
	}
	t.Logf("azsim container process: Uid %s, CapEff %s, CapBnd %s", fields["Uid"], fields["CapEff"], fields["CapBnd"])

	client := func(env ...string) ([]byte, error) {
		args := append(hardened("host"), "-v", dir+":/data:ro")
		for _, e := range env {
			args = append(args, "-e", e)
		}
		return podman(ctx, append(args, img.ref, "info", "--url", "https://"+addr)...).CombinedOutput()
	}
	out, err := client("SSL_CERT_FILE=/data/ca-bundle.pem")
	if err != nil {
		t.Errorf("azsim info over https with the CA in the system pool: %v\n%s", err, out)
	} else {
		t.Logf("azsim info with SSL_CERT_FILE: %.200s", strings.TrimSpace(string(out)))
	}
	out, err = client()
	if err == nil || !strings.Contains(string(out), "certificate signed by unknown authority") {
		t.Errorf("azsim info without the CA: %v, output %q; want an unknown authority error", err, out)
	} else {
		t.Logf("azsim info without the CA: %s", strings.TrimSpace(string(out)))
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// TestImagesCarryCARoots: the images have no CA bundle, so each binary must link the fallback
// roots; its SBOM, read from the binary's build information, says whether it does.
func TestImagesCarryCARoots(t *testing.T) {
	out := filepath.Join(framework.RepoRoot(), "_output", "images")
	for _, name := range []string{"azure-cloud-controller-manager", "azure-cloud-node-manager", "azure-disk-provisioner", "azsim"} {
		// Every platform built (make images: amd64 and arm64; CI: the host's), the host's always.
		sboms, err := filepath.Glob(filepath.Join(out, name, "sbom-linux-*.spdx.json"))
		if err != nil {
			t.Fatal(err)
		}
		host := filepath.Join(out, name, "sbom-linux-"+runtime.GOARCH+".spdx.json")
		if !slices.Contains(sboms, host) {
			t.Fatalf("no SBOM %s (run make images)", host)
		}
		for _, sbom := range sboms {
			arch := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sbom), "sbom-linux-"), ".spdx.json")
			b, err := os.ReadFile(sbom)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Packages []struct{ Name string } `json:"packages"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range doc.Packages {
				found = found || p.Name == "golang.org/x/crypto/x509roots/fallback"
			}
			if !found {
				t.Errorf("%s linux/%s does not link golang.org/x/crypto/x509roots/fallback: no CA roots in the image", name, arch)
			}
		}
	}
}
