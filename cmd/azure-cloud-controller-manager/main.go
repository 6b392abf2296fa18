// Command azure-cloud-controller-manager is the Azure cloud controller manager: the standard
// k8s.io/cloud-provider app (flags, leader election, /healthz, /metrics, --controllers) with the
// Azure provider registered as "azure" and the project's own controllers.
package main

import (
	"os"

	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	cloudcontrollerconfig "k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/controllers"
	_ "github.com/azure-ccm/azure-ccm/internal/controllers/adminstate" // admin-state controller
	_ "github.com/azure-ccm/azure-ccm/internal/controllers/pvzones"    // pv-zone-labels controller
	"github.com/azure-ccm/azure-ccm/internal/provider"
	_ "github.com/azure-ccm/azure-ccm/internal/servicegateway/controller" // service-gateway controller
)

func main() {
	opts, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}
	// The provider name defaults to azure, as in the existing Azure CCM.
	opts.KubeCloudShared.CloudProvider.Name = provider.ProviderName
	// More service workers than upstream (1): their writes to one load balancer or NSG are
	// merged, so more workers mean fewer ARM writes per service, not more.
	opts.ServiceController.ConcurrentServiceSyncs = defaultConcurrentServiceSyncs
	// Each service costs the service controller two API writes (finalizer, status) and two events:
	// at the upstream 20 QPS the API client, not Azure, would pace a burst.
	opts.Generic.ClientConnection.QPS, opts.Generic.ClientConnection.Burst = defaultKubeAPIQPS, defaultKubeAPIBurst
	installLoadBalancer()
	// Register the ARM metrics with the legacy registry served on /metrics.
	arm.DefaultMetrics()

	cmd := app.NewCloudControllerManagerCommand(opts, cloudInitializer, controllers.Initializers(),
		names.CCMControllerAliases(), benchmarkFlags(), wait.NeverStop)
	cmd.Use = "azure-cloud-controller-manager"
	os.Exit(cli.Run(cmd))
}

// cloudInitializer builds the provider. An invalid azure.json is fatal with the offending key
// named; login and ARM failures are retried with backoff in the provider's Initialize, after the
// secure port serves.
func cloudInitializer(c *cloudcontrollerconfig.CompletedConfig) cloudprovider.Interface {
	cc := c.ComponentConfig.KubeCloudShared.CloudProvider
	migrationClusterName = c.ComponentConfig.KubeCloudShared.ClusterName
	cloud, err := cloudprovider.InitCloudProvider(cc.Name, cc.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider %q could not be initialized: %v", cc.Name, err)
	}
	if cloud == nil {
		klog.Fatalf("Cloud provider %q is unknown (this binary serves %q)", cc.Name, provider.ProviderName)
	}
	return cloud
}
