package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/deploy/azure"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
)

// EnvRoleActionsDir names a directory where every environment writes, at teardown, the Azure
// role actions azsim saw each program need (RoleActionsRecord). A suite sets it to compare what
// its tests observed with the programs' roles (CheckRoles).
const EnvRoleActionsDir = "AZURE_CCM_ROLE_ACTIONS_DIR"

// RoleActionsRecord is one environment's observation.
type RoleActionsRecord struct {
	Test    string                       `json:"test"`
	Actions []middleware.RoleActionCount `json:"actions"`
}

// recordRoleActions writes the environment's role actions when EnvRoleActionsDir is set.
func (e *Env) recordRoleActions() {
	dir := os.Getenv(EnvRoleActionsDir)
	if dir == "" || e.Azure == nil {
		return
	}
	rec := RoleActionsRecord{Test: e.T.Name(), Actions: e.Azure.Server.Middleware().Stats().RoleActions}
	b, err := json.Marshal(rec)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, sanitizeName(e.T.Name())+"-"+e.Name+".json"), b, 0o644)
	}
	if err != nil {
		e.T.Logf("framework: recording role actions: %v", err)
	}
}

// RoleReport is what CheckRoles found.
type RoleReport struct {
	// Observed: program -> action (lower case) -> tests that needed it.
	Observed map[string]map[string][]string
	// Missing lists actions a program needed that its role does not allow.
	Missing []string
	// Unused lists role actions no test saw the program need.
	Unused []string
}

// CheckRoles reads every record in dir and compares, per program, the actions observed with its
// role. Unused actions are only meaningful when the whole suite ran.
func CheckRoles(dir string) (RoleReport, error) {
	rep := RoleReport{Observed: map[string]map[string][]string{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return rep, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return rep, err
		}
		var rec RoleActionsRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			return rep, fmt.Errorf("%s: %w", f, err)
		}
		for _, a := range rec.Actions {
			if _, ok := azure.ProgramRoles[a.Client]; !ok {
				continue // test code's own SDK clients
			}
			m := rep.Observed[a.Client]
			if m == nil {
				m = map[string][]string{}
				rep.Observed[a.Client] = m
			}
			k := strings.ToLower(a.Action)
			if len(m[k]) == 0 || m[k][len(m[k])-1] != rec.Test {
				m[k] = append(m[k], rec.Test)
			}
		}
	}
	for _, p := range azure.Programs() {
		role, err := azure.RoleOf(p)
		if err != nil {
			return rep, err
		}
		for a, tests := range rep.Observed[p] {
			if !role.Allows(a) {
				rep.Missing = append(rep.Missing, fmt.Sprintf("%s needs %s (in %s), which %s lacks", p, a, strings.Join(tests, ", "), azure.ProgramRoles[p]))
			}
		}
		for _, a := range role.Actions {
			if _, ok := azure.Unexercised[p][strings.ToLower(a)]; ok {
				continue
			}
			if len(rep.Observed[p][strings.ToLower(a)]) == 0 {
				rep.Unused = append(rep.Unused, fmt.Sprintf("%s holds %s, which no test saw %s need", azure.ProgramRoles[p], a, p))
			}
		}
	}
	sort.Strings(rep.Missing)
	sort.Strings(rep.Unused)
	return rep, nil
}
