package framework

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeCCM stands in for the CCM binary: it logs its flags and starts a child in its process
// group that carries the same flags, so the test can see both and check that stopping the CCM
// stops its children too.
const fakeCCM = `#!/bin/sh
echo "started $*"
echo "SSL_CERT_FILE=$SSL_CERT_FILE"
sh -c 'sleep 600; : "$@"' child "$@" &
wait
`

func TestCCMProcessLifecycle(t *testing.T) {
	RequireTools(t)
	bin := filepath.Join(t.TempDir(), "fake-ccm")
	if err := os.WriteFile(bin, []byte(fakeCCM), 0o755); err != nil {
		t.Fatal(err)
	}
	env := Start(t, Options{CCMBinary: bin})
	marker := "--test-marker=" + env.Name
	pids := func() []int {
		var out []int
		for _, p := range ProcessesMentioning(marker) {
			out = append(out, p.PID)
		}
		return out
	}
	twoProcs := func(context.Context) (bool, error) {
		procs := ProcessesMentioning(marker)
		return len(procs) == 2, &leak{procs: procs}
	}
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(env.CCMLogPath())
			t.Logf("fake CCM log:\n%s\nprocesses: %v", b, ProcessesMentioning(marker))
		}
	}()

	env.StartCCM(marker)
	env.WaitFor("fake CCM and its child", twoProcs, 30*time.Second)
	first := pids()

	env.RestartCCM()
	env.WaitFor("restarted fake CCM and its child", twoProcs, 30*time.Second)
	for _, pid := range pids() {
		if slices.Contains(first, pid) {
			t.Errorf("process %d survived the restart", pid)
		}
	}

	if err := env.StopCCM(); err != nil {
		t.Fatal(err)
	}
	if left := pids(); len(left) > 0 {
		t.Errorf("processes %v survived StopCCM", left)
	}
	log, err := os.ReadFile(env.CCMLogPath())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "started "); n != 2 {
		t.Errorf("CCM log has %d starts, want 2 (kept across restarts):\n%s", n, log)
	}
	for _, want := range []string{"SSL_CERT_FILE=" + env.Azure.CAFile + "\n", "--cloud-provider=azure", "--cloud-config=" + env.CloudConfigPath, "--kubeconfig=" + env.Kubeconfig, marker} {
		if !strings.Contains(string(log), want) {
			t.Errorf("CCM was not given %s:\n%s", want, log)
		}
	}
}

func TestWithoutOverridden(t *testing.T) {
	defaults := []string{"--v=2", "--authorization-always-allow-paths=/healthz,/metrics", "--leader-elect=false"}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, defaults},
		{[]string{"--v=4"}, []string{"--authorization-always-allow-paths=/healthz,/metrics", "--leader-elect=false"}},
		{[]string{"--authorization-always-allow-paths=/healthz", "--controllers=*"}, []string{"--v=2", "--leader-elect=false"}},
		{[]string{"-leader-elect=true", "--leader-elect-lease-duration=6s"}, []string{"--v=2", "--authorization-always-allow-paths=/healthz,/metrics"}},
	} {
		if got := withoutOverridden(defaults, c.args); !slices.Equal(got, c.want) {
			t.Errorf("withoutOverridden(%v) = %v, want %v", c.args, got, c.want)
		}
	}
}
