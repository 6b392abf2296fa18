package e2e

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

// TestMain compares, over every test that ran, the Azure role actions azsim saw each program
// need with the program's custom role (deploy/azure): an action a program needed and its role
// lacks fails the suite; when the whole suite ran and passed, so does a role action no test saw
// its program need (the role holds more than the code uses). The observations are kept in
// _output/test/role-actions.
func TestMain(m *testing.M) {
	flag.Parse()
	dir := filepath.Join(framework.RepoRoot(), "_output", "test", "role-actions")
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "role actions: %v\n", err)
		os.Exit(1)
	}
	_ = os.Setenv(framework.EnvRoleActionsDir, dir)
	code := m.Run()
	rep, err := framework.CheckRoles(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "role actions: %v\n", err)
		os.Exit(1)
	}
	printRoleReport(rep)
	if len(rep.Missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: programs needed actions their roles lack:\n  %s\n", strings.Join(rep.Missing, "\n  "))
		code = 1
	}
	whole := flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" && !testing.Short()
	switch {
	case !whole:
		fmt.Printf("role actions: a subset of the suite ran; unused role actions are not checked\n")
	case code != 0:
		fmt.Printf("role actions: the suite failed; unused role actions are not checked\n")
	case len(rep.Observed) == 0:
		fmt.Printf("role actions: no cluster test ran (no tools?); unused role actions are not checked\n")
	case len(rep.Unused) > 0:
		fmt.Fprintf(os.Stderr, "FAIL: roles hold actions their programs never needed in the suite:\n  %s\n", strings.Join(rep.Unused, "\n  "))
		code = 1
	}
	os.Exit(code)
}

func printRoleReport(rep framework.RoleReport) {
	programs := make([]string, 0, len(rep.Observed))
	for p := range rep.Observed {
		programs = append(programs, p)
	}
	sort.Strings(programs)
	for _, p := range programs {
		actions := make([]string, 0, len(rep.Observed[p]))
		for a, tests := range rep.Observed[p] {
			actions = append(actions, fmt.Sprintf("%s (%d tests)", a, len(tests)))
		}
		sort.Strings(actions)
		fmt.Printf("role actions needed by %s:\n  %s\n", p, strings.Join(actions, "\n  "))
	}
}
