package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// EnvToolsBin names the directory holding the tools; the Makefile exports it.
const EnvToolsBin = "AZURE_CCM_TOOLS_BIN"

// Tools are the absolute paths of the binaries a local cluster needs.
type Tools struct {
	Dir                   string
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Kwok                  string
	Kwokctl               string
}

// RepoRoot is the root of the work tree this package was compiled from.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("framework: cannot locate the source tree")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ToolsDir is $AZURE_CCM_TOOLS_BIN, or _output/tools/bin of the work tree.
func ToolsDir() string {
	if d := os.Getenv(EnvToolsBin); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "_output", "tools", "bin")
}

// FindTools resolves every tool in dir and reports the first one missing.
func FindTools(dir string) (Tools, error) {
	t := Tools{Dir: dir}
	for _, e := range []struct {
		name string
		dst  *string
	}{
		{"etcd", &t.Etcd},
		{"kube-apiserver", &t.KubeAPIServer},
		{"kube-controller-manager", &t.KubeControllerManager},
		{"kube-scheduler", &t.KubeScheduler},
		{"kubectl", &t.Kubectl},
		{"kwok", &t.Kwok},
		{"kwokctl", &t.Kwokctl},
	} {
		p := filepath.Join(dir, e.name)
		if _, err := exec.LookPath(p); err != nil {
			return Tools{}, fmt.Errorf("tool %s missing in %s (run `make tools`): %w", e.name, dir, err)
		}
		*e.dst = p
	}
	return t, nil
}

// InCI reports whether the tests run under CI, where missing tools are a failure.
func InCI() bool { return os.Getenv("CI") != "" }

// RequireTools returns the tools, skipping the test when they are missing outside CI and
// failing it under CI.
func RequireTools(t T) Tools {
	t.Helper()
	tools, err := FindTools(ToolsDir())
	if err == nil {
		return tools
	}
	if InCI() {
		t.Fatalf("CI is set but the cluster tools are missing: %v", err)
	}
	t.Skipf("skipping: cluster tools not installed (%v); run `make tools` or `make test`", err)
	return Tools{}
}

// BinDir is where the project's binaries are taken from: $AZURE_CCM_BIN_DIR, or where
// `make build` puts them.
func BinDir() string {
	if d := os.Getenv(EnvBinDir); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "_output", "bin")
}

// T is the part of testing.TB the framework uses, so that programs (the demo) can run an
// environment too. *testing.T and *testing.B satisfy it.
type T interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}
