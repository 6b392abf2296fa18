package main

import (
	"context"
	"os"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/poolmigration"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// envPoolMigrationExitAfter names a phase (poolmigration.Phase.String) after which a CCM built
// with -tags testhooks exits with status 3 (exitAfterPhase).
const envPoolMigrationExitAfter = "AZURE_CCM_POOL_MIGRATION_EXIT_AFTER"

// migratePoolsBeforeServing moves NIC-based cluster backend pools to IP-based membership when
// azure.json asks for nodeIP pools. Like the Basic to Standard migration it runs when the load
// balancer implementation is built, before any service reconcile or node sync could write
// addresses into a pool Azure still holds NIC-based. With nodeIP pools every start reads the
// cluster's load balancers and lists the NICs, scale sets and scale set NICs of resourceGroup
// (references left on instances show only there; the lists fill the caches the node resolver
// uses anyway); the nodes (those nodes selects, nil: all) only while a pool is NIC-based.
func migratePoolsBeforeServing(d provider.LoadBalancerDeps, o loadbalancer.BuildOptions, clusterName string, nodes labels.Selector) {
	poolmigration.RegisterMetrics()
	if !poolmigration.Needed(d.Config) {
		return
	}
	if d.Kube == nil || d.Nodes == nil || d.Clients == nil || d.Clients.Caches == nil {
		klog.ErrorS(nil, "Backend pool migration to IP-based skipped: the provider has no Kubernetes client or node resolver")
		return
	}
	po := poolmigration.Options{Config: d.Config, ClusterName: clusterName, Writers: d.Writers, Caches: d.Clients.Caches,
		Nodes: d.Nodes, Kube: d.Kube, Recorder: d.Recorder, PoolEntries: o.PoolEntries, NodeSelector: nodefilter.String(nodes)}
	if s := exitAfterPhase(envPoolMigrationExitAfter); s != "" {
		if stop, ok := poolmigration.ParsePhase(s); ok {
			po.AfterPhase = func(p poolmigration.Phase) {
				if p == stop {
					klog.InfoS("Exiting after pool migration phase (test hook)", "phase", p.String(), "env", envPoolMigrationExitAfter)
					klog.Flush()
					os.Exit(3)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(d.Context, migrationTimeout)
	defer cancel()
	if _, err := poolmigration.Run(ctx, po); err != nil {
		klog.ErrorS(err, "Backend pool migration to IP-based did not finish; services are served anyway (rules keep the staging pool meanwhile) and the migration resumes at the next start")
	}
}
