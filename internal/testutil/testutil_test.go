package testutil

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	WaitFor(t, "three checks", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("checked %d times, want 3", n)
	}
}

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestEventuallyFailsWithWhatAndTheLastError(t *testing.T) {
	f := &fatalTB{TB: t}
	n := 0
	began := time.Now()
	eventually(f, "the answer", 30*time.Millisecond, func() error { n++; return fmt.Errorf("check %d", n) })
	if took := time.Since(began); took < 30*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout", took)
	}
	want := fmt.Sprintf("timed out after 30ms waiting for the answer: check %d", n)
	if f.msg != want || n < 2 {
		t.Errorf("failure %q after %d checks, want %q", f.msg, n, want)
	}
}

func TestPollStopsAtTheFirstSuccess(t *testing.T) {
	n := 0
	if err := poll(time.Minute, func() error {
		if n++; n < 5 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || n != 5 {
		t.Fatalf("poll = %v after %d checks, want nil after 5", err, n)
	}
}

// TestOnlyTestsImportIt: no package of the module imports testutil outside its tests, so
// nothing of it reaches a binary.
func TestOnlyTestsImportIt(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}: {{join .Imports " "}}`, "github.com/azure-ccm/azure-ccm/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/azure-ccm/azure-ccm/internal/testutil"
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ": ")
		for _, imp := range strings.Fields(imports) {
			if imp == self {
				t.Errorf("%s imports %s outside its tests", pkg, self)
			}
		}
	}
}
