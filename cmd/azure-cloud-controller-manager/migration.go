package main

import (
	"context"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/migration"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/provider"
)

// migrationTimeout bounds the migration at start-up; after it the load balancer is served
// anyway (a failed migration is retried at the next start).
const migrationTimeout = 15 * time.Minute

// envMigrationExitAfter names a phase (migration.Phase.String) after which a CCM built with
// -tags testhooks exits with status 3 (exitAfterPhase).
const envMigrationExitAfter = "AZURE_CCM_MIGRATION_EXIT_AFTER"

// migrateBeforeServing runs the Basic to Standard load balancer migration when the load
// balancer implementation is built: after leader election and before the service controller
// (or any other controller) gets the implementation, so no service reconcile runs while Basic
// load balancers are being replaced. Without Basic load balancers it costs one LIST. clusterName
// is --cluster-name: the migration names pools and public IPs as the service controller will;
// nodes the nodes it sees (--node-filter-requirements, nil: all).
func migrateBeforeServing(d provider.LoadBalancerDeps, lb *loadbalancer.LoadBalancer, clusterName string, nodes labels.Selector) {
	migration.RegisterMetrics()
	if d.Config == nil || !d.Config.IsStandardSKU() {
		return
	}
	if d.Kube == nil {
		klog.ErrorS(nil, "Basic to Standard load balancer migration skipped: the provider has no Kubernetes client")
		return
	}
	o := migration.Options{Config: d.Config, ClusterName: clusterName, Network: d.Clients.Network,
		Compute: d.Clients.Compute, Writers: d.Writers, Kube: d.Kube, Recorder: d.Recorder, LoadBalancer: lb,
		NodeSelector: nodefilter.String(nodes)}
	if d.Nodes != nil {
		o.VMSetOf = func(ctx context.Context, n *v1.Node) (string, error) {
			inst, err := d.Nodes.Instance(ctx, n)
			if err != nil {
				return "", err
			}
			return inst.VMSet.Name, nil
		}
	}
	if s := exitAfterPhase(envMigrationExitAfter); s != "" {
		if stop, ok := migration.ParsePhase(s); ok {
			o.AfterPhase = func(p migration.Phase) {
				if p == stop {
					klog.InfoS("Exiting after migration phase (test hook)", "phase", p.String(), "env", envMigrationExitAfter)
					klog.Flush()
					os.Exit(3)
				}
			}
		}
	}
	ctx, cancel := context.WithTimeout(d.Context, migrationTimeout)
	defer cancel()
	if _, err := migration.Run(ctx, o); err != nil {
		klog.ErrorS(err, "Basic to Standard load balancer migration did not finish; services are served anyway and the migration resumes at the next start")
	}
}
