package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A failed creation reports the end of each component's log: the cluster, and its logs, are
// deleted right after.
func TestClusterLogTails(t *testing.T) {
	c := &Cluster{ClusterOptions: ClusterOptions{WorkDir: t.TempDir(), Name: "c"}}
	logs := filepath.Join(c.Dir(), "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	var long []string
	for i := 1; i <= 30; i++ {
		long = append(long, fmt.Sprintf("line %d", i))
	}
	for name, text := range map[string]string{
		"kube-apiserver.log": strings.Join(long, "\n") + "\n",
		"etcd.log":           "only line\n",
	} {
		if err := os.WriteFile(filepath.Join(logs, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := c.logTails(5)
	for _, want := range []string{"--- kube-apiserver.log (last 5 lines)\nline 26\n", "line 30", "--- etcd.log (last 1 lines)\nonly line"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "line 25\n") {
		t.Errorf("more than 5 lines of kube-apiserver.log:\n%s", got)
	}
	if got := (&Cluster{ClusterOptions: ClusterOptions{WorkDir: t.TempDir(), Name: "none"}}).logTails(5); got != "" {
		t.Errorf("no logs: %q", got)
	}
}
