package writeplan

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/azure-ccm/azure-ccm/internal/changes"
	"github.com/azure-ccm/azure-ccm/internal/dryrun"
)

// JSON writes the plan as indented JSON.
func (p *Plan) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

var actionMark = map[string]string{"create": "+", "update": "~", "delete": "-", "create, then delete": "±"}

// Text writes the plan for people: every resource with its writes, who asks for each and
// what it changes; the migration; the problems; a summary line ("No changes." when there is
// nothing to do).
func (p *Plan) Text(w io.Writer) error {
	r := p.placeholderReplacer()
	var b strings.Builder
	fmt.Fprintf(&b, "Plan for cluster %q: %d services, %d nodes.\n", p.ClusterName, p.Services, p.Nodes)
	if !p.Pending() {
		b.WriteString("\nNo changes. Azure already matches what the CCM would write.\n")
		_, err := io.WriteString(w, b.String())
		return err
	}
	if p.Migration != nil {
		b.WriteString("\nBasic to Standard load balancer migration (runs at start, before any service):\n")
		fmt.Fprintf(&b, "    Basic load balancers: %s\n", strings.Join(p.Migration.BasicLoadBalancers, ", "))
		for _, s := range p.Migration.Steps {
			fmt.Fprintf(&b, "    step %s\n", s)
		}
		for _, s := range p.Migration.Warnings {
			fmt.Fprintf(&b, "    warning: %s\n", s)
		}
		b.WriteString("    (the service writes below are planned against the state before the migration)\n")
	}
	if m := p.PoolMigration; m != nil {
		b.WriteString("\nBackend pool migration to IP-based (runs at start, before any service):\n")
		fmt.Fprintf(&b, "    load balancers: %s\n", strings.Join(m.LoadBalancers, ", "))
		for _, s := range m.Steps {
			fmt.Fprintf(&b, "    step %s\n", s)
		}
		for _, s := range m.Warnings {
			fmt.Fprintf(&b, "    warning: %s\n", s)
		}
		b.WriteString("    (the service writes below are planned against the state before the migration)\n")
	}
	counts := map[string]int{}
	removed := map[string]int{}
	for _, res := range p.Resources {
		counts[res.Action]++
		fmt.Fprintf(&b, "\n%s %s %s %s\n", actionMark[res.Action], res.Action, res.Type, res.Name)
		fmt.Fprintf(&b, "    id: %s\n", res.ID)
		for _, wr := range res.Writes {
			for _, d := range wr.Removes {
				removed[d.Kind]++
			}
			for _, line := range writeLines(wr) {
				b.WriteString("    " + r.Replace(line) + "\n")
			}
		}
	}
	if len(p.Problems) > 0 {
		b.WriteString("\nProblems (not written by the CCM as things are; look at them before switching over):\n")
		for _, pr := range p.Problems {
			reason := ""
			if pr.Reason != "" {
				reason = pr.Reason + ": "
			}
			fmt.Fprintf(&b, "  ! %s: %s%s\n", pr.Actor, reason, pr.Message)
		}
	}
	if len(p.Placeholders) > 0 {
		b.WriteString("\nAddresses in angle brackets are the ones Azure assigns when the resource is created.\n")
	}
	fmt.Fprintf(&b, "\nPlan: %d to create, %d to update, %d to delete", counts["create"], counts["update"], counts["delete"])
	if n := counts["create, then delete"]; n > 0 {
		fmt.Fprintf(&b, ", %d created and deleted", n)
	}
	kinds := make([]string, 0, len(removed))
	for k := range removed {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(&b, "; %d %s removed with them", removed[k], plural(removed[k], k))
	}
	if p.Migration != nil {
		fmt.Fprintf(&b, "; a migration of %d steps", len(p.Migration.Steps))
	}
	if p.PoolMigration != nil {
		fmt.Fprintf(&b, "; a backend pool migration of %d steps", len(p.PoolMigration.Steps))
	}
	fmt.Fprintf(&b, "; %d %s.\n", len(p.Problems), plural(len(p.Problems), "problem"))
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLines renders one write: a line per change, each naming who asked for it.
func writeLines(wr Write) []string {
	who := wr.Actor
	if who == "" {
		who = "the CCM"
	}
	if wr.Child != "" {
		who += " [backend pool " + wr.Child + " write]"
	}
	switch {
	case wr.Op == dryrun.Delete:
		out := []string{who + ": deleted"}
		for _, d := range wr.Removes {
			out = append(out, "    removes "+dependentLine(d))
		}
		return out
	case len(wr.Changes) == 0:
		return []string{who + ": written (no field-level difference: read-only fields only)"}
	}
	var out []string
	for _, c := range wr.Changes {
		if wr.Op == dryrun.Create && c.Collection == "" {
			out = append(out, who+": created with "+fieldList(c.Fields))
			continue
		}
		out = append(out, who+": "+changes.Describe(c))
	}
	return out
}

// dependentLine names what a deletion takes with it: "private endpoint connection pe-1.a
// (private endpoint /subscriptions/…/privateEndpoints/pe-1, Approved)".
func dependentLine(d dryrun.Dependent) string {
	var about []string
	if d.Target != "" {
		about = append(about, "private endpoint "+d.Target)
	}
	if d.State != "" {
		about = append(about, d.State)
	}
	line := d.Kind + " " + d.Name
	if len(about) > 0 {
		line += " (" + strings.Join(about, ", ") + ")"
	}
	return line
}

// fieldList is a creation's own fields, bounded.
func fieldList(fs []changes.Field) string {
	const maxFields = 8
	parts := make([]string, 0, min(len(fs), maxFields)+1)
	for i, f := range fs {
		if i == maxFields {
			parts = append(parts, fmt.Sprintf("and %d more fields", len(fs)-maxFields))
			break
		}
		parts = append(parts, f.String())
	}
	return strings.Join(parts, "; ")
}

// placeholderReplacer shows placeholder addresses as what they stand for.
func (p *Plan) placeholderReplacer() *strings.Replacer {
	addrs := make([]string, 0, len(p.Placeholders))
	for a := range p.Placeholders {
		addrs = append(addrs, a)
	}
	// Longer first, so 240.0.0.1 does not replace the start of 240.0.0.10.
	sort.Slice(addrs, func(i, j int) bool {
		return len(addrs[i]) > len(addrs[j]) || (len(addrs[i]) == len(addrs[j]) && addrs[i] < addrs[j])
	})
	var pairs []string
	for _, a := range addrs {
		pairs = append(pairs, a, "<"+p.Placeholders[a]+">")
	}
	return strings.NewReplacer(pairs...)
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
