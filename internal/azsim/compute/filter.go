package compute

import (
	"fmt"
	"regexp"
	"strings"
)

// ListFilter is a parsed $filter of the VM list. CRP understands only a few
// forms; the CCM uses exactly one: 'virtualMachineScaleSet/id' eq '<id>'.
type ListFilter struct {
	ScaleSetID string // "" means no filter
}

var scaleSetFilterRE = regexp.MustCompile(`(?i)^\s*'?virtualMachineScaleSet/id'?\s+eq\s+'([^']*)'\s*$`)

// ParseVMListFilter parses the $filter query parameter of a VM list.
func ParseVMListFilter(s string) (ListFilter, error) {
	if strings.TrimSpace(s) == "" {
		return ListFilter{}, nil
	}
	m := scaleSetFilterRE.FindStringSubmatch(s)
	if m == nil {
		return ListFilter{}, fmt.Errorf("the $filter '%s' is not supported; only 'virtualMachineScaleSet/id' eq '<id>' is", s)
	}
	return ListFilter{ScaleSetID: m[1]}, nil
}

// Match reports whether a VM with the given scale set reference passes.
func (f ListFilter) Match(vmScaleSetID string) bool {
	return f.ScaleSetID == "" || strings.EqualFold(strings.TrimRight(f.ScaleSetID, "/"), strings.TrimRight(vmScaleSetID, "/"))
}
