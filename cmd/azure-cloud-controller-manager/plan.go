package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli/globalflag"
	genericcontrollermanager "k8s.io/controller-manager/app"
	cmconfig "k8s.io/controller-manager/config"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/controllers/adminstate"
	"github.com/azure-ccm/azure-ccm/internal/controllers/localpools"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/writeplan"
)

// Exit codes of the plan command (as terraform plan -detailed-exitcode): 0 nothing to write,
// 2 writes pending (or services the CCM cannot serve as they are), 1 the plan failed.
const (
	planExitPending = 2
)

// planCommand is `azure-cloud-controller-manager plan`: it takes the CCM's own flags (paste
// the Deployment's arguments), connects to the cluster and the subscription, prints every ARM
// write the CCM would make now and exits. It starts no controller, takes no lease, serves
// nothing and writes nothing, to Azure or to the cluster: a read-only role is enough.
func planCommand(w *wiring, controllerNames []string) *cobra.Command {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	opts.KubeCloudShared.CloudProvider.Name = provider.ProviderName
	output := "text"
	flagsOf := &wiring{}
	timeout := 5 * time.Minute
	cmd := &cobra.Command{
		Use:   "plan [flags of the CCM]",
		Short: "Print every Azure write the CCM would make now, then exit: 0 no changes, 2 changes pending, 1 error",
		Long: `plan connects to the cluster (--kubeconfig) and the subscription (--cloud-config) with
read-only permissions, runs the CCM's planners once against the current state (every
LoadBalancer service and the cleanup of those being deleted, node backend pools, admin state,
routes when --configure-cloud-routes, the Basic to Standard migration) and prints every ARM
write the CCM would make, grouped by resource, with the service or node each change is for.
Nothing is written to Azure or to the cluster: no event, finalizer, status or lease.

It takes the CCM's flags, so the arguments of the Deployment can be given as they are.

Exit status: 0 when Azure already matches ("No changes."), 2 when writes are pending or a
service cannot be planned (an invalid annotation: the CCM would write nothing for it), 1 when
the plan could not be made.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("%q takes no arguments, got %q", cmd.CommandPath(), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("--output must be text or json, not %q", output)
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			pending, err := runPlan(ctx, opts, flagsOf, controllerNames, output, cmd.OutOrStdout())
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if pending {
				klog.Flush()
				os.Exit(planExitPending)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	for _, f := range opts.Flags(controllerNames, app.ControllersDisabledByDefault.List(), names.CCMControllerAliases(), nil, nil).FlagSets {
		fs.AddFlagSet(f)
	}
	// The CCM's own flags are accepted so that the Deployment's arguments can be pasted. Only
	// the cloud config source flags (azure.json is read as the CCM reads it) and the node
	// filter change the plan.
	for _, f := range flagsOf.flags().FlagSets {
		fs.AddFlagSet(f)
	}
	pf := cmd.Flags()
	pf.StringVar(&output, "output", output, "plan format: text or json")
	pf.DurationVar(&timeout, "timeout", timeout, "give up after this long (Azure login and reads included)")
	globalflag.AddGlobalFlags(pf, cmd.Name())
	return cmd
}

// runPlan makes the plan and prints it; pending reports whether anything is to be written.
func runPlan(ctx context.Context, o *options.CloudControllerManagerOptions, w *wiring, controllerNames []string, output string, out io.Writer) (bool, error) {
	sel, err := nodefilter.Parse(w.nodeFilter)
	if err != nil {
		return false, err
	}
	if errs := o.Generic.Validate(controllerNames, app.ControllersDisabledByDefault.List(), names.CCMControllerAliases()); len(errs) > 0 {
		return false, errors.Join(errs...)
	}
	var generic cmconfig.GenericControllerManagerConfiguration
	if err := o.Generic.ApplyTo(&generic, controllerNames, app.ControllersDisabledByDefault.List(), names.CCMControllerAliases()); err != nil {
		return false, err
	}
	enabled := func(name string) bool {
		return genericcontrollermanager.IsControllerEnabled(name, app.ControllersDisabledByDefault, generic.Controllers)
	}
	shared := o.KubeCloudShared
	if shared.CloudProvider.Name != provider.ProviderName {
		return false, fmt.Errorf("--cloud-provider %q is unknown (this binary serves %q)", shared.CloudProvider.Name, provider.ProviderName)
	}
	rc, err := clientcmd.BuildConfigFromFlags(o.Master, o.Generic.ClientConnection.Kubeconfig)
	if err != nil {
		return false, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = o.Generic.ClientConnection.QPS, int(o.Generic.ClientConnection.Burst)
	rc.UserAgent = "azure-cloud-controller-manager-plan"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return false, err
	}
	// azure.json from the same sources as the CCM: the file, the Secret, or both.
	src := w.source
	src.File, src.Kube = shared.CloudProvider.CloudConfigFile, kube
	loaded, err := src.Load(ctx)
	if err != nil {
		return false, err
	}
	cloud, err := provider.NewFromBytes(ctx, loaded.Data, provider.Options{})
	if err != nil {
		return false, err
	}
	po := writeplan.Options{Cloud: cloud, ClusterName: shared.ClusterName, Kube: kube, NodeSelector: nodefilter.String(sel),
		Services:   enabled(names.ServiceLBController),
		AdminState: enabled(adminstate.Name) && cloud.Config.AdminStateEnabled(),
		LocalPools: enabled(localpools.Name),
		Routes:     enabled(names.NodeRouteController) && shared.ConfigureCloudRoutes && cloud.Config.RouteTableName != "",
	}
	if po.Routes {
		if po.ClusterCIDRs, err = clusterCIDRs(shared.ClusterCIDR); err != nil {
			return false, err
		}
	}
	p, err := writeplan.Run(ctx, po)
	if err != nil {
		return false, err
	}
	if output == "json" {
		err = p.JSON(out)
	} else {
		err = p.Text(out)
	}
	return p.Pending(), err
}

// clusterCIDRs parses --cluster-cidr as the route controller does (comma-separated, at most
// one per family); the route controller does not start without it.
func clusterCIDRs(s string) ([]netip.Prefix, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("--cluster-cidr is required with --configure-cloud-routes (the route controller does not start without it); pass --configure-cloud-routes=false if the CCM runs without routes")
	}
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("--cluster-cidr %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
