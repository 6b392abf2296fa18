package compute

import "testing"

func TestComputerName(t *testing.T) {
	tests := []struct {
		prefix string
		id     int
		want   string
	}{
		{"vmss", 0, "vmss000000"},
		{"vmss", 9, "vmss000009"},
		{"vmss", 10, "vmss00000a"},
		{"aks-pool-1234-vmss", 35, "aks-pool-1234-vmss00000z"},
		{"n", 36, "n000010"},
		{"n", 36*36*36*36*36*36 - 1, "nzzzzzz"},
	}
	for _, tt := range tests {
		if got := ComputerName(tt.prefix, tt.id); got != tt.want {
			t.Errorf("ComputerName(%q, %d) = %q, want %q", tt.prefix, tt.id, got, tt.want)
		}
	}
}

func TestVMNames(t *testing.T) {
	if got := UniformVMName("ss", 12); got != "ss_12" {
		t.Errorf("UniformVMName = %q", got)
	}
	if got := FlexVMName("flex", 0xab); got != "flex_000000ab" {
		t.Errorf("FlexVMName = %q", got)
	}
	if got := FlexNICName("flex_000000ab"); got != "flex_000000ab-nic" {
		t.Errorf("FlexNICName = %q", got)
	}
}

func TestParseInstanceID(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"0", 0, true},
		{"17", 17, true},
		{"", 0, false},
		{"-1", 0, false},
		{"01", 0, false},
		{"ss_1", 0, false},
		{"1a", 0, false},
		{"9999999999", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseInstanceID(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseInstanceID(%q) = %d,%v want %d,%v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
