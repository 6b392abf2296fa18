package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRaceReports(t *testing.T) {
	dir := t.TempDir()
	log := strings.Join([]string{
		"I1127 12:00:00.000000 1 main.go:1] starting",
		"==================",
		"WARNING: DATA RACE",
		"Write at 0x00c000123456 by goroutine 7:",
		"  main.f()",
		"Previous read at 0x00c000123456 by goroutine 8:",
		"  main.g()",
		"==================",
		"I1127 12:00:01.000000 1 main.go:2] going on",
		"==================",
		"WARNING: DATA RACE",
		"Read at 0x00c000654321 by goroutine 9:",
		"==================",
	}, "\n")
	if err := os.WriteFile(filepath.Join(dir, "ccm.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "clean.log"), []byte("nothing to see\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, known := RaceReports(dir, KnownUpstreamRaces())
	if len(known) != 0 {
		t.Errorf("known races in reports of main.f and main.g: %q", known)
	}
	if len(got) != 2 {
		t.Fatalf("got %d reports, want 2: %q", len(got), got)
	}
	if !strings.HasPrefix(got[0], "ccm.log:\nWARNING: DATA RACE\nWrite at") || !strings.Contains(got[0], "main.g()") {
		t.Errorf("first report: %q", got[0])
	}
	if strings.Contains(got[0], "going on") || !strings.Contains(got[1], "Read at 0x00c000654321") {
		t.Errorf("reports not split at the separators: %q", got)
	}
	if r, k := RaceReports(t.TempDir(), KnownUpstreamRaces()); len(r)+len(k) != 0 {
		t.Errorf("empty dir: %q %q", r, k)
	}
}

// A known race of a dependency is told apart from one in the project's code by the top frames
// of both stacks, whichever access the detector reports first.
func TestRaceReportsKnownUpstream(t *testing.T) {
	report := func(first, second string) string {
		return strings.Join([]string{
			"==================",
			"WARNING: DATA RACE",
			"Read at 0x00c000103c20 by goroutine 371:",
			"  " + first + "()",
			"      /root/go/pkg/mod/x/controller.go:503 +0x27e",
			"  k8s.io/cloud-provider/controllers/service.(*Controller).syncNodes()",
			"      /root/go/pkg/mod/x/controller.go:724 +0x18e",
			"",
			"Previous write at 0x00c000103c20 by goroutine 368:",
			"  " + second + "()",
			"      /root/go/pkg/mod/x/controller.go:339 +0x1a8",
			"",
			"Goroutine 371 (running) created at:",
			"  k8s.io/cloud-provider/controllers/service.(*Controller).Run()",
			"==================",
		}, "\n")
	}
	const (
		cacheRead  = "k8s.io/cloud-provider/controllers/service.(*serviceCache).allServices"
		cacheWrite = "k8s.io/cloud-provider/controllers/service.(*Controller).processServiceCreateOrUpdate"
		ours       = "github.com/azure-ccm/azure-ccm/internal/writer.(*Writer).Peek"
	)
	for _, tc := range []struct {
		name          string
		first, second string
		known         bool
	}{
		{"upstream race", cacheRead, cacheWrite, true},
		{"upstream race, accesses the other way round", cacheWrite, cacheRead, true},
		{"our function against the upstream one", cacheRead, ours, false},
		{"ours on both sides", ours, ours, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "ccm.log"), []byte(report(tc.first, tc.second)), 0o644); err != nil {
				t.Fatal(err)
			}
			unknown, known := RaceReports(dir, KnownUpstreamRaces())
			if got := len(known) == 1 && len(unknown) == 0; got != tc.known {
				t.Errorf("known %q, unknown %q; want known: %v", known, unknown, tc.known)
			}
			if len(known)+len(unknown) != 1 {
				t.Errorf("want one report, got known %q unknown %q", known, unknown)
			}
		})
	}
}
