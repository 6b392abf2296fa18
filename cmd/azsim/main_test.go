package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
)

func TestClientCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := server.Start(ctx, server.Options{IMDSAddr: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Setenv("AZSIM_URL", s.URL())
	t.Setenv("AZSIM_CA", s.CAFile())
	topo := filepath.Join(t.TempDir(), "topo.yaml")
	if err := os.WriteFile(topo, []byte("resourceGroups: [rg-cli]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Keep the commands' JSON off the test output.
	devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	stdout := os.Stdout
	os.Stdout = devnull
	defer func() { os.Stdout = stdout }()

	rgID := "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-cli"
	for _, args := range [][]string{
		{"info"},
		{"seed", "-f", topo},
		{"get", rgID},
		{"list", "Microsoft.Resources/resourceGroups"},
		{"fault", "add", "--kind", "error", "--status", "503", "--id", "x", "--rate", "0.5"},
		{"fault", "add", "--json", `{"kind":"latency","delay":"1ms"}`},
		{"fault", "list"},
		{"fault", "rm", "x"},
		{"fault", "clear"},
		{"latency", "set", "--realistic"},
		{"latency", "get"},
		{"latency", "clear"},
		{"throttle", "set", "--reads", "10"},
		{"throttle", "get"},
		{"throttle", "off"},
		{"stats"},
		{"stats", "--prometheus"},
		{"stats", "--reset"},
		{"imds-vm", "vm-1"},
		{"reset"},
	} {
		if err := run(args); err != nil {
			t.Errorf("azsim %v: %v", args, err)
		}
	}
	if s.IMDS().DefaultVM() != "" {
		t.Error("reset did not clear the IMDS default VM")
	}
	if _, ok := s.Engine().GetResource(rgID); ok {
		t.Error("reset kept the resource group")
	}
	for _, args := range [][]string{
		{"nonsense"},
		{"get"},
		{"fault", "add", "--kind", "explode"},
		{"seed"},
		{"vm", "explode", rgID + "/providers/Microsoft.Compute/virtualMachines/x"},
	} {
		if err := run(args); err == nil {
			t.Errorf("azsim %v succeeded", args)
		}
	}
	t.Setenv("AZSIM_URL", "")
	if err := run([]string{"stats"}); err == nil {
		t.Error("stats without a server succeeded")
	}
}
