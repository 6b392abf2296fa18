package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/test/framework"
)

func TestActionFor(t *testing.T) {
	for _, c := range []struct {
		method, typ, want string
		needed, err       bool
	}{
		{"GET", "Microsoft.Network/loadBalancers", "Microsoft.Network/loadBalancers/read", true, false},
		{"PUT", "Microsoft.Network/loadBalancers/backendAddressPools", "Microsoft.Network/loadBalancers/backendAddressPools/write", true, false},
		{"PATCH", "Microsoft.Compute/virtualMachineScaleSets", "Microsoft.Compute/virtualMachineScaleSets/write", true, false},
		{"DELETE", "Microsoft.Network/publicIPAddresses", "Microsoft.Network/publicIPAddresses/delete", true, false},
		{"GET", "Microsoft.Resources/providers", "Microsoft.Resources/subscriptions/providers/read", true, false},
		{"GET", "Microsoft.Network/locations/operations", "", false, false},
		{"GET", "Microsoft.Compute/locations/operationResults", "", false, false},
		{"GET", "Microsoft.Compute/locations/DiskOperations", "", false, false},
		{"POST", "other", "", false, false},
		{"GET", "", "", false, false},
		{"POST", "Microsoft.Compute/virtualMachines", "", true, true},
	} {
		got, needed, err := ActionFor(c.method, c.typ)
		if got != c.want || needed != c.needed || (err != nil) != c.err {
			t.Errorf("ActionFor(%s, %q) = %q, %v, %v; want %q, %v, err=%v", c.method, c.typ, got, needed, err, c.want, c.needed, c.err)
		}
	}
}

func TestRoleAllows(t *testing.T) {
	r := Role{Actions: []string{"Microsoft.Network/loadBalancers/*", "Microsoft.Compute/virtualMachines/read"},
		NotActions: []string{"Microsoft.Network/loadBalancers/delete"}}
	for action, want := range map[string]bool{
		"Microsoft.Network/loadBalancers/read":                      true,
		"microsoft.network/loadbalancers/backendAddressPools/write": false, // path.Match: * stops at /
		"Microsoft.Network/loadBalancers/delete":                    false,
		"Microsoft.Compute/virtualMachines/read":                    true,
		"Microsoft.Compute/virtualMachines/write":                   false,
	} {
		if got := r.Allows(action); got != want {
			t.Errorf("Allows(%s) = %v, want %v", action, got, want)
		}
	}
}

// TestCustomRoleMatchesDoc: the role file parses, and docs/azure-permissions.md lists exactly
// its actions (the doc's per-feature tables are what operators read; the file is what they apply).
func TestCustomRoleMatchesDoc(t *testing.T) {
	root := framework.RepoRoot()
	r, err := LoadRole(filepath.Join(root, "deploy", "azure", "azure-ccm-role.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "docs", "azure-permissions.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Microsoft\\.[A-Za-z]+/[A-Za-z/]+)`").FindAllStringSubmatch(string(b), -1) {
		inDoc[strings.ToLower(m[1])] = true
	}
	inRole := map[string]bool{}
	for _, a := range r.Actions {
		inRole[strings.ToLower(a)] = true
		if !inDoc[strings.ToLower(a)] {
			t.Errorf("role action %s is not explained in docs/azure-permissions.md", a)
		}
	}
	for a := range inDoc {
		if !inRole[a] {
			t.Errorf("docs/azure-permissions.md names %s, which the role lacks", a)
		}
	}
}

// TestPlanRoleIsReadOnly: the plan command's role only reads, and reads nothing the CCM's own
// role does not (it is the CCM's reads, disks aside: the plan does not label volumes).
func TestPlanRoleIsReadOnly(t *testing.T) {
	root := framework.RepoRoot()
	plan, err := LoadRole(filepath.Join(root, "deploy", "azure", "azure-ccm-plan-role.json"))
	if err != nil {
		t.Fatal(err)
	}
	ccm, err := LoadRole(filepath.Join(root, "deploy", "azure", "azure-ccm-role.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range plan.Actions {
		if !strings.HasSuffix(strings.ToLower(a), "/read") {
			t.Errorf("plan role action %s is not a read", a)
		}
		if !ccm.Allows(a) {
			t.Errorf("plan role action %s is not in the CCM's role", a)
		}
	}
	for _, a := range ccm.Actions {
		if strings.HasSuffix(strings.ToLower(a), "/read") && !strings.HasPrefix(a, "Microsoft.Compute/disks/") && !plan.Allows(a) {
			t.Errorf("the CCM reads with %s, the plan role lacks it", a)
		}
	}
}
