// Package azure holds the Azure custom roles of the programs that call ARM, one JSON file per
// program (what `az role definition create` takes), embedded so that tests compare them with the
// actions the programs are seen to need.
package azure

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// Role is an Azure custom role definition.
type Role struct {
	Name             string   `json:"Name"`
	IsCustom         bool     `json:"IsCustom"`
	Description      string   `json:"Description"`
	Actions          []string `json:"Actions"`
	NotActions       []string `json:"NotActions"`
	DataActions      []string `json:"DataActions"`
	NotDataActions   []string `json:"NotDataActions"`
	AssignableScopes []string `json:"AssignableScopes"`
}

// ProgramRoles maps the programs that call ARM, named by the first word of their User-Agent, to
// their role file. The node manager calls ARM only in ARM mode (--use-instance-metadata=false);
// by default it reads the instance metadata service and needs no role.
var ProgramRoles = map[string]string{
	"azure-ccm":                "azure-ccm-role.json",
	"azure-disk-provisioner":   "azure-disk-provisioner-role.json",
	"azure-cloud-node-manager": "azure-cloud-node-manager-role.json",
}

// Unexercised are role actions a program's code needs that no e2e scenario reaches, each with
// the reason. The suite's check that a role holds nothing its program never needed accepts
// them; a missing one still fails.
var Unexercised = map[string]map[string]string{
	"azure-ccm": {
		"microsoft.compute/virtualmachinescalesets/publicipaddresses/read": "instance-level public IPs of Uniform scale set nodes " +
			"(their ExternalIP addresses, internal/nodes): no e2e topology gives an instance a public IP",
	},
	"azure-cloud-node-manager": {
		"microsoft.compute/virtualmachinescalesets/publicipaddresses/read": "instance-level public IPs of Uniform scale set nodes " +
			"(their ExternalIP addresses, internal/nodes): no e2e topology gives an instance a public IP",
		"microsoft.network/publicipaddresses/read": "public IPs on the NIC of a VM or Flexible instance (its ExternalIP address, " +
			"internal/nodes): no e2e topology gives a node's NIC a public IP",
	},
}

// Programs lists ProgramRoles' keys, sorted.
func Programs() []string {
	out := make([]string, 0, len(ProgramRoles))
	for p := range ProgramRoles {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// RoleOf reads a program's role.
func RoleOf(program string) (Role, error) {
	f, ok := ProgramRoles[program]
	if !ok {
		return Role{}, fmt.Errorf("no role for program %q", program)
	}
	return Load(f)
}

// Load reads and checks one embedded role file.
func Load(file string) (Role, error) {
	b, err := files.ReadFile(file)
	if err != nil {
		return Role{}, err
	}
	var r Role
	if err := json.Unmarshal(b, &r); err != nil {
		return Role{}, fmt.Errorf("%s: %w", file, err)
	}
	if r.Name == "" || len(r.Actions) == 0 || len(r.AssignableScopes) == 0 {
		return Role{}, fmt.Errorf("%s: Name, Actions and AssignableScopes are required", file)
	}
	return r, nil
}

// Allows reports whether the role grants action: an Actions pattern matches it (ARM's "*"
// wildcards, case-insensitive) and no NotActions pattern does.
func (r Role) Allows(action string) bool {
	match := func(patterns []string) bool {
		for _, p := range patterns {
			if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(action)); ok {
				return true
			}
		}
		return false
	}
	return match(r.Actions) && !match(r.NotActions)
}
