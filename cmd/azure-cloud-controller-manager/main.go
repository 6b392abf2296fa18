// Command azure-cloud-controller-manager is the Azure cloud controller manager: the standard
// k8s.io/cloud-provider app (flags, leader election, /healthz, /metrics, --controllers) with the
// Azure provider as "azure" and the project's own controllers. Everything is wired here, in
// wiring.go: the provider (which builds its Azure writers when it starts; a cloud config reload
// starts a new provider with writers of its own), the load balancer implementation on those
// writers, and the controllers that share them.
package main

import (
	"os"

	// Mozilla's CA roots in the binary, used when the system has none (the images carry no
	// CA bundle); SSL_CERT_FILE or a system bundle still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/cloudconfig"
	"github.com/azure-ccm/azure-ccm/internal/controllers"
	"github.com/azure-ccm/azure-ccm/internal/controllers/driftaudit"
	"github.com/azure-ccm/azure-ccm/internal/controllers/loginhealth"
	"github.com/azure-ccm/azure-ccm/internal/nodefilter"
	"github.com/azure-ccm/azure-ccm/internal/provider"
	"github.com/azure-ccm/azure-ccm/internal/reload"
)

// defaultConcurrentServiceSyncs replaces the upstream default of --concurrent-service-syncs (1).
// Workers mostly wait on group-commit writers, and a load balancer or NSG write carries the
// changes of every worker waiting on it, so a write can merge at most as many services as there
// are workers: with 50, a burst of 300 services cost 15 load balancer and 19 NSG writes; with
// every service of the burst in flight at once, 3 and 4 (test/bench TestLoadBalancerBurstNICPools).
// A worker is a goroutine waiting on ARM; what a service sync holds of the node list is shared.
const defaultConcurrentServiceSyncs = 500

// --kube-api-qps / --kube-api-burst defaults (upstream 20 / 30), see main.
const (
	defaultKubeAPIQPS   = 50
	defaultKubeAPIBurst = 100
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
	// Register the ARM metrics with the legacy registry served on /metrics.
	arm.DefaultMetrics()

	w := &wiring{served: reload.New(nil)}
	initializers, err := controllers.Initializers(w.controllers())
	if err != nil {
		klog.Fatalf("controllers: %v", err)
	}
	// Every controller runs so that a cloud config reload can restart it on the new provider.
	initializers = w.served.Wrap(initializers)
	cmd := app.NewCloudControllerManagerCommand(opts, w.initCloud, initializers,
		names.CCMControllerAliases(), w.flags(), wait.NeverStop)
	cmd.Use = "azure-cloud-controller-manager"
	cmd.AddCommand(planCommand(w, app.ControllerNames(initializers)))
	cmd.Long += "\n\nSubcommands:\n  plan   print every Azure write the CCM would make now and exit, writing nothing " +
		"(azure-cloud-controller-manager plan --help)"
	os.Exit(cli.Run(cmd))
}

// flags are the CCM's own hidden flags.
func (w *wiring) flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("azure load balancer")
	fs.BoolVar(&w.disableWriteMerging, "disable-lb-write-merging", false,
		"benchmark baseline only: one ARM write per load balancer change, no merging")
	_ = fs.MarkHidden("disable-lb-write-merging")
	da := fss.FlagSet("drift audit")
	da.DurationVar(&w.auditPeriod, "drift-audit-period", driftaudit.DefaultPeriod,
		"how often the drift-audit controller checks every LoadBalancer service against Azure and repairs what drifted "+
			"(a rule, probe, frontend, pool member or NSG rule changed outside the CCM); 0 turns it off, as does --controllers=*,-drift-audit")
	da.IntVar(&w.auditWorkers, "drift-audit-workers", driftaudit.DefaultWorkers,
		"services the drift audit checks and repairs at once")
	lg := fss.FlagSet("azure login")
	lg.DurationVar(&w.loginStepDown, "login-step-down-after", loginhealth.DefaultStepDownAfter,
		"how long Azure logins may fail with a configuration error (login server certificate not trusted, credentials refused, unknown tenant) "+
			"before the leader exits so that a standby replica takes the lease; /healthz fails meanwhile. Transient failures never count. 0 never exits")
	// The existing provider's node-ipam flags; --allocate-node-cidrs, --cluster-cidr and
	// --cidr-allocator-type are the cloud-provider app's own (generic flags).
	// The existing provider's cloud config source flags.
	src := fss.FlagSet("cloud config")
	src.StringVar(&w.source.Name, "cloud-config-secret-name", cloudconfig.DefaultSecretName,
		"Secret holding azure.json under --cloud-config-key: the only source without --cloud-config; with it, read only when the file sets cloudConfigType merge (merged over the file) or secret (the only source)")
	src.StringVar(&w.source.Namespace, "cloud-config-secret-namespace", cloudconfig.DefaultSecretNamespace, "namespace of --cloud-config-secret-name")
	src.StringVar(&w.source.Key, "cloud-config-key", cloudconfig.SecretKey, "key of the Secret's data holding azure.json")
	src.BoolVar(&w.dynamicReloading, "enable-dynamic-reloading", false,
		"watch the cloud config file and Secret; a valid change restarts the cloud provider and its controllers in-process (leadership kept), an invalid one is refused with an event on the Secret and the running configuration stays")
	// The existing provider's node filter.
	nf := fss.FlagSet("node filtering")
	nf.StringVar(&w.nodeFilter, nodefilter.Flag, "",
		"label selector of the nodes the CCM manages (e.g. 'env=prod', '!maintenance', 'env in (prod,staging),!maintenance'): "+
			"every controller sees only the matching nodes (load balancer backend pools, routes, node initialization and lifecycle, node IPAM); Services and other resources are not filtered. Empty: every node")
	ipamFS := fss.FlagSet("node ipam controller")
	ipamFS.StringVar(&w.ipam.ServiceCIDR, "service-cluster-ip-range", "",
		"CIDR range(s) of Services (one, or an IPv4 and an IPv6 one separated by a comma). Node pod CIDRs overlapping it are never assigned. Used with --allocate-node-cidrs.")
	ipamFS.IntVar(&w.ipam.MaskSize, "node-cidr-mask-size", 0,
		"Mask size of node pod CIDRs in a single-stack cluster (0: 24 for IPv4, 64 for IPv6). Ignored with a warning in a dual-stack cluster.")
	ipamFS.IntVar(&w.ipam.MaskSizeIPv4, "node-cidr-mask-size-ipv4", 0, "Mask size of IPv4 node pod CIDRs (0: --node-cidr-mask-size, else 24).")
	ipamFS.IntVar(&w.ipam.MaskSizeIPv6, "node-cidr-mask-size-ipv6", 0, "Mask size of IPv6 node pod CIDRs (0: --node-cidr-mask-size, else 64).")
	return fss
}
