// Command azure-cloud-node-manager is the node-side agent: it initialises and then keeps up to
// date the Node of the VM it runs on (providerID, zone, region and instance-type labels,
// addresses; it removes the uninitialized taint), reading either the VM's instance metadata
// service (the default; no Azure credentials) or ARM with the cluster's azure.json
// (--use-instance-metadata=false --cloud-config=...). With --wait-routes it keeps new nodes
// NetworkUnavailable until the CCM's route controller has created their routes. It accepts every
// flag of the existing provider's cloud-node-manager.
package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	// Mozilla's CA roots in the binary, used when the system has none (the images carry no
	// CA bundle); SSL_CERT_FILE or a system bundle still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/term"
	"k8s.io/component-base/version/verflag"
	genericcontrollermanager "k8s.io/controller-manager/app"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/nodemanager"
	"github.com/azure-ccm/azure-ccm/internal/nodes"
	"github.com/azure-ccm/azure-ccm/internal/windowsservice"
)

const userAgent = "azure-cloud-node-manager"

// windowsServiceName is the Windows service the node manager registers under.
const windowsServiceName = "azure-cloud-node-manager"

func main() {
	os.Exit(cli.Run(newCommand()))
}

func newCommand() *cobra.Command {
	o := newOptions()
	cmd := &cobra.Command{
		Use:          userAgent,
		Long:         "The node manager initialises and updates the Node of the VM it runs on, from the instance metadata service or from ARM.",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			verflag.PrintAndExitIfRequested()
			cliflag.PrintFlags(cmd.Flags())
			if err := o.complete(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			ctx, err := windowsservice.Run(ctx, windowsServiceName, o.windowsService)
			if err != nil {
				return err
			}
			return run(ctx, o)
		},
		Args: cobra.NoArgs,
	}
	fss := o.flags(cmd.Name())
	for _, f := range fss.FlagSets {
		cmd.Flags().AddFlagSet(f)
	}
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cmd.SetUsageFunc(func(cmd *cobra.Command) error {
		fmt.Fprintf(cmd.OutOrStderr(), "Usage:\n  %s\n", cmd.UseLine())
		cliflag.PrintSections(cmd.OutOrStderr(), fss, cols)
		return nil
	})
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		fmt.Fprintf(cmd.OutOrStdout(), "%s\n\nUsage:\n  %s\n", cmd.Long, cmd.UseLine())
		cliflag.PrintSections(cmd.OutOrStdout(), fss, cols)
	})
	return cmd
}

func run(ctx context.Context, o *options) error {
	rc, err := clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst, rc.ContentType = o.qps, int(o.burst), o.contentType
	rc.DisableCompression = true
	kube, err := kubernetes.NewForConfig(rest.AddUserAgent(rc, userAgent))
	if err != nil {
		return err
	}
	source, err := newSource(ctx, o)
	if err != nil {
		return err
	}
	klog.InfoS("Node manager starting", "node", o.nodeName, "source", source.Name(), "waitRoutes", o.waitRoutes)

	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(2)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer b.Shutdown()
	s := &nodemanager.Syncer{Kube: kube, NodeName: o.nodeName, Source: source, WaitRoutes: o.waitRoutes,
		Init:     nodes.InitOptions{BetaLabels: o.betaLabels, RemoveUninitializedTaint: o.removeTaint},
		Recorder: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: userAgent, Host: o.nodeName})}

	if o.once {
		return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: time.Minute},
			func(ctx context.Context) (bool, error) {
				if err := s.Sync(ctx); err != nil {
					klog.ErrorS(err, "Initialising node failed; retrying", "node", o.nodeName)
					return false, nil
				}
				return true, nil
			})
	}
	if o.secureServing.BindPort != 0 || o.secureServing.Listener != nil {
		if err := serve(ctx, o); err != nil {
			return err
		}
	}
	trigger := make(chan struct{}, 1)
	if err := watchNode(ctx, kube, o, trigger); err != nil {
		return err
	}
	s.Run(ctx, trigger, o.nodeStatusUpdateFrequency)
	return nil
}

// newSource is IMDS, or ARM with azure.json.
func newSource(ctx context.Context, o *options) (nodemanager.Source, error) {
	if o.useInstanceMetadata {
		// IMDS must be reached directly, never through a proxy.
		return nodemanager.IMDS{Endpoint: o.imdsEndpoint,
			Client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}}, nil
	}
	// $CONTAINER_SANDBOX_MOUNT_POINT and the like: a Windows HostProcess container sees its
	// volumes below that directory.
	data, err := os.ReadFile(os.ExpandEnv(o.cloudConfig))
	if err != nil {
		return nil, fmt.Errorf("--cloud-config: %w", err)
	}
	cfg, err := config.Parse(data, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--cloud-config %s: %w", o.cloudConfig, err)
	}
	if _, err := arm.ChooseAuthMethod(cfg); err != nil {
		return nil, fmt.Errorf("--cloud-config %s: %w", o.cloudConfig, err)
	}
	// Its own User-Agent, so that Azure's activity log and the role checks tell its reads from
	// the CCM's.
	clients, err := arm.New(ctx, cfg, arm.Options{ApplicationID: userAgent})
	if err != nil {
		return nil, fmt.Errorf("ARM clients: %w", err)
	}
	klog.InfoS("Reading node metadata from ARM", "cloud", clients.Environment.Name, "auth", clients.AuthMethod,
		"subscription", cfg.SubscriptionID, "resourceGroup", cfg.ResourceGroup, "vmType", cfg.VMType)
	return nodemanager.ARM{Resolver: nodes.NewResolver(cfg, clients.Caches, nil)}, nil
}

// watchNode fires trigger when the Node appears or something the node manager writes or reads
// changes on it (labels, taints, providerID, addresses, conditions).
func watchNode(ctx context.Context, kube kubernetes.Interface, o *options, trigger chan<- struct{}) error {
	resync := time.Duration(0)
	if o.minResyncPeriod > 0 {
		resync = time.Duration(float64(o.minResyncPeriod) * (1 + rand.Float64())) //nolint:gosec // G404: jitter, not a secret
	}
	f := informers.NewSharedInformerFactoryWithOptions(kube, resync, informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.nodeName).String()
	}))
	fire := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	_, err := f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { fire() },
		UpdateFunc: func(oldObj, newObj any) {
			a, ok1 := oldObj.(*v1.Node)
			b, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 || a.ResourceVersion == b.ResourceVersion || relevantChange(a, b) {
				fire()
			}
		},
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	return nil
}

// relevantChange: what the node manager writes or decides on changed (not heartbeats).
func relevantChange(a, b *v1.Node) bool {
	return a.Spec.ProviderID != b.Spec.ProviderID || !reflect.DeepEqual(a.Labels, b.Labels) ||
		!reflect.DeepEqual(a.Spec.Taints, b.Spec.Taints) || !reflect.DeepEqual(a.Status.Addresses, b.Status.Addresses) ||
		networkCondition(a) != networkCondition(b)
}

func networkCondition(n *v1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeNetworkUnavailable {
			return string(c.Status) + "/" + c.Reason
		}
	}
	return ""
}

// serve starts /healthz (and /metrics, /livez ...) on --secure-port with delegated
// authentication and authorization, as the existing node manager does.
func serve(ctx context.Context, o *options) error {
	if err := o.secureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	var info *server.SecureServingInfo
	var loopback *rest.Config
	if err := o.secureServing.ApplyTo(&info, &loopback); err != nil {
		return err
	}
	var authn server.AuthenticationInfo
	var authz server.AuthorizationInfo
	o.authentication.RemoteKubeConfigFile, o.authorization.RemoteKubeConfigFile = o.kubeconfig, o.kubeconfig
	if err := o.authentication.ApplyTo(&authn, info, nil); err != nil {
		return err
	}
	if err := o.authorization.ApplyTo(&authz); err != nil {
		return err
	}
	checks := controllerhealthz.NewMutableHealthzHandler(healthz.PingHealthz)
	handler := genericcontrollermanager.BuildHandlerChain(
		genericcontrollermanager.NewBaseHandler(&componentbaseconfig.DebuggingConfiguration{}, checks), &authz, &authn)
	if _, _, err := info.Serve(handler, 0, ctx.Done()); err != nil {
		return fmt.Errorf("--secure-port: %w", err)
	}
	return nil
}
