package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"

	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/reload"
)

// TestNodeFilterFlag: the CCM command accepts --node-filter-requirements (the existing
// provider's flag) and the value selects nodes as a label selector.
func TestNodeFilterFlag(t *testing.T) {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		t.Fatal(err)
	}
	w := &wiring{served: reload.New(nil)}
	inits, err := controllers.Initializers(w.controllers())
	if err != nil {
		t.Fatal(err)
	}
	cmd := app.NewCloudControllerManagerCommand(opts, w.initCloud, inits, names.CCMControllerAliases(), w.flags(), wait.NeverStop)
	if err := cmd.ParseFlags([]string{"--node-filter-requirements=env in (prod,staging),!maintenance"}); err != nil {
		t.Fatal(err)
	}
	sel, err := nodefilter.Parse(w.nodeFilter)
	if err != nil || sel == nil {
		t.Fatalf("selector %v, %v", sel, err)
	}
	for set, want := range map[string]bool{"env=prod": true, "env=staging": true, "env=test": false, "env=prod,maintenance=true": false} {
		l, _ := labels.ConvertSelectorToLabelsMap(set)
		if sel.Matches(l) != want {
			t.Errorf("%s: match %v, want %v", set, !want, want)
		}
	}
}
