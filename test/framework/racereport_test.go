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
	got := RaceReports(dir)
	if len(got) != 2 {
		t.Fatalf("got %d reports, want 2: %q", len(got), got)
	}
	if !strings.HasPrefix(got[0], "ccm.log:\nWARNING: DATA RACE\nWrite at") || !strings.Contains(got[0], "main.g()") {
		t.Errorf("first report: %q", got[0])
	}
	if strings.Contains(got[0], "going on") || !strings.Contains(got[1], "Read at 0x00c000654321") {
		t.Errorf("reports not split at the separators: %q", got)
	}
	if r := RaceReports(t.TempDir()); len(r) != 0 {
		t.Errorf("empty dir: %q", r)
	}
}
