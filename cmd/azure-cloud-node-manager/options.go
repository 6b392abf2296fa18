package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/version/verflag"

	"github.com/azure-ccm/azure-ccm/internal/windowsservice"
)

// options are the node manager's flags: every flag of the existing provider's
// cloud-node-manager (same names, meanings and defaults) plus --imds-endpoint, --once and
// --remove-uninitialized-taint.
type options struct {
	master, kubeconfig, nodeName string
	cloudConfig                  string
	useInstanceMetadata          bool
	waitRoutes                   bool
	betaLabels                   bool
	nodeStatusUpdateFrequency    time.Duration
	minResyncPeriod              time.Duration
	contentType                  string
	qps                          float32
	burst                        int32
	// windowsService is registered on Windows builds only (windowsservice.AddFlag).
	windowsService bool

	imdsEndpoint string
	removeTaint  bool
	once         bool

	secureServing  *apiserveroptions.SecureServingOptionsWithLoopback
	authentication *apiserveroptions.DelegatingAuthenticationOptions
	authorization  *apiserveroptions.DelegatingAuthorizationOptions
}

func newOptions() *options {
	o := &options{
		useInstanceMetadata:       true,
		nodeStatusUpdateFrequency: 5 * time.Minute,
		qps:                       20,
		burst:                     30,
		imdsEndpoint:              "http://169.254.169.254",
		removeTaint:               true,
		secureServing:             apiserveroptions.NewSecureServingOptions().WithLoopback(),
		authentication:            apiserveroptions.NewDelegatingAuthenticationOptions(),
		authorization:             apiserveroptions.NewDelegatingAuthorizationOptions(),
	}
	// As the existing node manager: no HTTPS endpoint unless --secure-port is given, an
	// in-memory self-signed certificate unless one is, and delegated authn/z optional.
	o.secureServing.BindPort = 0
	o.secureServing.ServerCert.CertDirectory = ""
	o.secureServing.ServerCert.PairName = "azure-cloud-node-manager"
	o.authentication.RemoteKubeConfigFileOptional = true
	o.authorization.RemoteKubeConfigFileOptional = true
	return o
}

// flags registers every flag in named sets (for --help).
func (o *options) flags(name string) cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	o.secureServing.AddFlags(fss.FlagSet("secure serving"))
	o.authentication.AddFlags(fss.FlagSet("authentication"))
	o.authorization.AddFlags(fss.FlagSet("authorization"))

	fs := fss.FlagSet("misc")
	windowsservice.AddFlag(fs, &o.windowsService)
	fs.StringVar(&o.master, "master", o.master, "The address of the Kubernetes API server (overrides any value in kubeconfig).")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "Path to a kubeconfig (empty: in-cluster configuration).")
	fs.StringVar(&o.nodeName, "node-name", o.nodeName, "Name of the Node of this VM (default: the hostname, lower case).")
	fs.DurationVar(&o.nodeStatusUpdateFrequency, "node-status-update-frequency", o.nodeStatusUpdateFrequency,
		"How often the Node is reconciled with the VM's metadata (changes of the Node itself are handled at once).")
	fs.DurationVar(&o.minResyncPeriod, "min-resync-period", o.minResyncPeriod,
		"Resync period of the Node informer: random between this and twice this (0: no resync).")
	fs.StringVar(&o.contentType, "kube-api-content-type", o.contentType, "Content type of requests sent to the API server.")
	fs.Float32Var(&o.qps, "kube-api-qps", o.qps, "QPS to the API server.")
	fs.Int32Var(&o.burst, "kube-api-burst", o.burst, "Burst to the API server.")
	fs.BoolVar(&o.waitRoutes, "wait-routes", o.waitRoutes,
		"Mark the Node NetworkUnavailable while it is initialised, until the CCM's route controller has created its routes (kubenet).")
	fs.BoolVar(&o.useInstanceMetadata, "use-instance-metadata", o.useInstanceMetadata,
		"Read the VM's metadata from the instance metadata service; false: from ARM with --cloud-config.")
	fs.StringVar(&o.cloudConfig, "cloud-config", o.cloudConfig, "Path to azure.json; used (and required) with --use-instance-metadata=false.")
	fs.BoolVar(&o.betaLabels, "enable-deprecated-beta-topology-labels", o.betaLabels,
		"Also write failure-domain.beta.kubernetes.io/zone|region and beta.kubernetes.io/instance-type.")
	fs.StringVar(&o.imdsEndpoint, "imds-endpoint", o.imdsEndpoint, "Instance metadata service endpoint.")
	fs.BoolVar(&o.removeTaint, "remove-uninitialized-taint", o.removeTaint,
		"Remove node.cloudprovider.kubernetes.io/uninitialized once the Node is initialised.")
	fs.BoolVar(&o.once, "once", o.once, "Initialise the Node once and exit.")

	global := fss.FlagSet("global")
	verflag.AddFlags(global)
	globalflag.AddGlobalFlags(global, name)
	return fss
}

// complete fills defaults that depend on the host and checks the combination of flags.
func (o *options) complete() error {
	if o.nodeName == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return fmt.Errorf("--node-name is required (the hostname is unknown: %w)", err)
		}
		o.nodeName = host
	}
	// Node names are lower case; the existing node manager lowers the flag too.
	o.nodeName = strings.ToLower(o.nodeName)
	if !o.useInstanceMetadata && o.cloudConfig == "" {
		return fmt.Errorf("--use-instance-metadata=false needs --cloud-config (azure.json with ARM credentials)")
	}
	if o.nodeStatusUpdateFrequency <= 0 {
		return fmt.Errorf("--node-status-update-frequency must be positive")
	}
	var errs []error
	errs = append(errs, o.secureServing.Validate()...)
	errs = append(errs, o.authentication.Validate()...)
	errs = append(errs, o.authorization.Validate()...)
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}

// newFlagSet is the command line of the node manager (tests parse with it).
func newFlagSet(o *options, name string) (*pflag.FlagSet, cliflag.NamedFlagSets) {
	fss := o.flags(name)
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	for _, f := range fss.FlagSets {
		fs.AddFlagSet(f)
	}
	return fs, fss
}
