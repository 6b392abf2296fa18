// Command azure-disk-provisioner is a zone-aware dynamic provisioner of Azure managed disks for
// StorageClasses with provisioner disk.azure-ccm.io (internal/disks/provisioner). It logs in to
// ARM with an azure.json (the CCM's, or its own with a narrower role: deploy/azure) and serves
// /healthz and /metrics on an HTTPS port with delegated authorization (internal/serving).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	// Mozilla's CA roots in the binary, used when the system has none (the images carry no
	// CA bundle); SSL_CERT_FILE or a system bundle still take precedence.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/google/uuid"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/version/verflag"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/disks/provisioner"
	"github.com/azure-ccm/azure-ccm/internal/serving"
)

// userAgent starts the User-Agent of the provisioner's ARM requests.
const userAgent = "azure-disk-provisioner"

// Leader election timing: the provisioner library's defaults.
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

type flags struct {
	kubeconfig, cloudConfig, name, extraNames, leNamespace, removedMetricsAddr string
	leaderElect                                                                bool
	threadiness                                                                int
	serving                                                                    *serving.Options
}

func newFlags(fs *pflag.FlagSet) *flags {
	f := &flags{serving: serving.NewOptions(0, userAgent, "/healthz")}
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	fs.StringVar(&f.cloudConfig, "cloud-config", "/etc/kubernetes/azure.json", "the azure.json to log in to ARM with")
	fs.StringVar(&f.name, "provisioner-name", provisioner.DefaultName, "provisioner name of the StorageClasses served")
	fs.StringVar(&f.extraNames, "additional-provisioner-names", "", "comma-separated further provisioner names served (e.g. kubernetes.io/azure-disk; see docs/disks.md before using it)")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "run as one of several replicas with leader election")
	fs.StringVar(&f.leNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election lease")
	fs.IntVar(&f.threadiness, "threadiness", 4, "claims and volumes handled in parallel")
	fs.StringVar(&f.removedMetricsAddr, "metrics-address", "", "removed: /metrics and /healthz are served on --secure-port")
	_ = fs.MarkHidden("metrics-address")
	f.serving.AddFlags(fs)
	return f
}

func main() {
	klog.InitFlags(nil)
	fs := pflag.NewFlagSet("azure-disk-provisioner", pflag.ExitOnError)
	fs.AddGoFlagSet(flag.CommandLine)
	f := newFlags(fs)
	verflag.AddFlags(fs)
	_ = fs.Parse(os.Args[1:])
	verflag.PrintAndExitIfRequested()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		klog.ErrorS(err, "azure-disk-provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, f *flags) error {
	if f.removedMetricsAddr != "" {
		return errors.New("--metrics-address was removed: /metrics and /healthz are served on --secure-port over HTTPS, /metrics to authorised clients only")
	}
	cfg, err := config.LoadFile(f.cloudConfig)
	if err != nil {
		return fmt.Errorf("invalid cloud config: %w", err)
	}
	// Unreadable certificate or token files do not heal: stop now with the key named.
	if err := arm.CheckCredentials(cfg); err != nil {
		return fmt.Errorf("invalid cloud config: %w", err)
	}
	metrics := provisioner.NewMetrics()
	metrics.Register()
	// Its own User-Agent: its Azure role differs from the CCM's (deploy/azure).
	clients, err := arm.New(ctx, cfg, arm.Options{Metrics: arm.DefaultMetrics(), ApplicationID: userAgent})
	if err != nil {
		return fmt.Errorf("ARM clients: %w", err)
	}
	rest, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return err
	}
	rest.UserAgent = userAgent
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodes := factory.Core().V1().Nodes()
	claims := factory.Core().V1().PersistentVolumeClaims().Informer()
	volumes := factory.Core().V1().PersistentVolumes().Informer()
	classes := factory.Storage().V1().StorageClasses().Informer()

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: userAgent})

	p := provisioner.New(provisioner.Options{Disks: disks.NewClient(clients), SubscriptionID: cfg.SubscriptionID,
		Location: cfg.Location, ResourceGroup: cfg.ResourceGroup, Nodes: nodes.Lister(), Recorder: recorder, Metrics: metrics})

	opts := []func(*controller.ProvisionController) error{
		// Leader election is run here, so that /healthz can report a leader that stopped renewing.
		controller.LeaderElection(false),
		controller.Threadiness(f.threadiness),
		// A disk must not outlive its PV: the finalizer keeps the PV until the disk is deleted.
		controller.AddFinalizer(true),
		// The controller's informers come from the shared factory, so /healthz sees their sync.
		controller.ClaimsInformer(claims), controller.VolumesInformer(volumes), controller.ClassesInformer(classes),
	}
	if names := splitNames(f.extraNames); len(names) > 0 {
		opts = append(opts, controller.AdditionalProvisionerNames(names))
	}
	pc := controller.NewProvisionController(ctx, kube, f.name, p, opts...)

	health := newHealth(f.leaderElect)
	health.addSynced("nodes", nodes.Informer().HasSynced)
	health.addSynced("persistentvolumeclaims", claims.HasSynced)
	health.addSynced("persistentvolumes", volumes.HasSynced)
	health.addSynced("storageclasses", classes.HasSynced)
	mux := http.NewServeMux()
	healthz.InstallHandler(mux, health.checks()...)
	mux.Handle("/metrics", legacyregistry.Handler())
	if _, err := f.serving.Serve(ctx, mux); err != nil {
		return err
	}

	factory.Start(ctx.Done())
	klog.InfoS("Starting azure-disk-provisioner", "name", f.name, "additionalNames", f.extraNames, "location", cfg.Location,
		"resourceGroup", cfg.ResourceGroup, "auth", clients.AuthMethod, "securePort", f.serving.Secure.BindPort)
	if !f.leaderElect {
		pc.Run(ctx)
		return nil
	}
	return runLeaderElected(ctx, kube, f, health.leader, pc.Run)
}

// runLeaderElected runs fn while this replica holds the Lease the provisioner library used
// (named after the provisioner, "/" replaced by "-"), so that replicas of both versions exclude
// each other during an upgrade.
func runLeaderElected(ctx context.Context, kube kubernetes.Interface, f *flags, watchdog *leaderelection.HealthzAdaptor, fn func(context.Context)) error {
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, f.leNamespace, strings.ReplaceAll(f.name, "/", "-"),
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: host + "_" + uuid.NewString()})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	lost := make(chan struct{})
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
		WatchDog: watchdog, ReleaseOnCancel: true, Name: f.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: fn,
			OnStoppedLeading: func() { close(lost) },
		},
	})
	select {
	case <-ctx.Done():
		return nil
	case <-lost:
		return errors.New("leader election lost")
	}
}

func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
