// Package compute emulates the Microsoft.Compute resources the CCM reads and
// writes (availability sets, VMs, scale sets and their instances, disks) on
// the azsim ARM engine.
//
// The files without I/O (names, scale, views, provider, filter, clone) are
// pure functions over the armcompute/v7 model types; register, vm, vmss,
// vmssvm, availset_disk, read and derive plug them into the engine.
//
// Go API:
//
//	network.Register(e)                       // first: resource groups, subnets, pools, NICs
//	compute.Register(e)                       // defaults: eastus zones 1-3, westus non-zonal
//	compute.Register(e, compute.Config{Locations: []compute.Location{{Name: "eastus", DisplayName: "East US", Zones: []string{"1", "2", "3"}}}})
//
// Everything else goes through ordinary ARM requests (PUT a scale set with
// sku.capacity=N to get N instances; POST .../deallocate to shut a VM down).
// Stored VM and instance documents keep their instance view under
// properties.instanceView (read it with compute.PowerOf(doc)); the control
// API can flip it without ARM with compute.SetPower(e, id, compute.PowerDeallocated).
package compute

import (
	"fmt"
	"strconv"
	"strings"
)

// computerNameSuffixLen is the width of the base-36 instance suffix that Azure
// appends to a Uniform scale set's computerNamePrefix. The CCM relies on it: a
// node name minus its last 6 characters must equal the prefix.
const computerNameSuffixLen = 6

// ComputerName returns the OS computer name of Uniform instance id: the prefix
// followed by id in lower-case base 36, left-padded with zeros to 6 digits.
func ComputerName(prefix string, id int) string {
	s := strconv.FormatInt(int64(id), 36)
	if len(s) < computerNameSuffixLen {
		s = strings.Repeat("0", computerNameSuffixLen-len(s)) + s
	}
	return prefix + s
}

// UniformVMName is the resource name of a Uniform scale set instance.
func UniformVMName(scaleSet string, id int) string {
	return scaleSet + "_" + strconv.Itoa(id)
}

// FlexVMName is the name Azure gives a Flexible scale set member it creates
// from sku.capacity: the scale set name, an underscore and 8 hex digits.
func FlexVMName(scaleSet string, suffix uint32) string {
	return fmt.Sprintf("%s_%08x", scaleSet, suffix)
}

// FlexNICName is the name of the standalone NIC created for a Flexible member.
func FlexNICName(vmName string) string {
	return vmName + "-nic"
}

// ParseInstanceID parses a Uniform instance id from a URL segment. Real CRP
// refuses anything that is not a non-negative decimal number.
func ParseInstanceID(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}
