package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/azure-ccm/azure-ccm/deploy/azure"
	"github.com/azure-ccm/azure-ccm/test/framework"
)

func TestRoleAllows(t *testing.T) {
	r := azure.Role{Actions: []string{"Microsoft.Network/loadBalancers/*", "Microsoft.Compute/virtualMachines/read"},
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

// TestCustomRolesMatchDoc: every program's role parses, and docs/azure-permissions.md names each
// role file and lists exactly the union of their actions (the doc's per-feature tables are what
// operators read; the files are what they apply). The CCM's role holds no disk write or delete:
// only the disk provisioner writes disks.
func TestCustomRolesMatchDoc(t *testing.T) {
	root := framework.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "docs", "azure-permissions.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile("`(Microsoft\\.[A-Za-z]+/[A-Za-z/]+)`").FindAllStringSubmatch(doc, -1) {
		inDoc[strings.ToLower(m[1])] = true
	}
	inRoles := map[string]bool{}
	for _, p := range azure.Programs() {
		r, err := azure.RoleOf(p)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(doc, azure.ProgramRoles[p]) {
			t.Errorf("docs/azure-permissions.md does not name %s (the role of %s)", azure.ProgramRoles[p], p)
		}
		for _, a := range r.Actions {
			inRoles[strings.ToLower(a)] = true
			if !inDoc[strings.ToLower(a)] {
				t.Errorf("%s action %s is not explained in docs/azure-permissions.md", azure.ProgramRoles[p], a)
			}
		}
	}
	for a := range inDoc {
		if !inRoles[a] {
			t.Errorf("docs/azure-permissions.md names %s, which no role holds", a)
		}
	}
	ccm, err := azure.RoleOf("azure-ccm")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"Microsoft.Compute/disks/write", "Microsoft.Compute/disks/delete"} {
		if ccm.Allows(a) {
			t.Errorf("the CCM's role allows %s, which only the disk provisioner needs", a)
		}
	}
}

// TestPlanRoleIsReadOnly: the plan command's role only reads, and reads nothing the CCM's own
// role does not (it is the CCM's reads, disks aside: the plan does not label volumes).
func TestPlanRoleIsReadOnly(t *testing.T) {
	plan, err := azure.Load("azure-ccm-plan-role.json")
	if err != nil {
		t.Fatal(err)
	}
	ccm, err := azure.RoleOf("azure-ccm")
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
