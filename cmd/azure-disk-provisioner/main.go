// Command azure-disk-provisioner is a zone-aware dynamic provisioner of Azure managed disks for
// StorageClasses with provisioner disk.azure-ccm.io (internal/disks/provisioner). It logs in to
// ARM with the CCM's azure.json (internal/config, internal/arm).
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

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/config"
	"github.com/azure-ccm/azure-ccm/internal/disks"
	"github.com/azure-ccm/azure-ccm/internal/disks/provisioner"
)

// userAgent starts the User-Agent of the provisioner's ARM requests.
const userAgent = "azure-disk-provisioner"

type flags struct {
	kubeconfig, cloudConfig, name, extraNames, leNamespace, metricsAddr string
	leaderElect                                                         bool
	threadiness                                                         int
}

func main() {
	klog.InitFlags(nil)
	var f flags
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty = in-cluster configuration")
	flag.StringVar(&f.cloudConfig, "cloud-config", "/etc/kubernetes/azure.json", "the CCM's azure.json")
	flag.StringVar(&f.name, "provisioner-name", provisioner.DefaultName, "provisioner name of the StorageClasses served")
	flag.StringVar(&f.extraNames, "additional-provisioner-names", "", "comma-separated further provisioner names served (e.g. kubernetes.io/azure-disk; see docs/disks.md before using it)")
	flag.BoolVar(&f.leaderElect, "leader-elect", true, "run as one of several replicas with leader election")
	flag.StringVar(&f.leNamespace, "leader-election-namespace", "kube-system", "namespace of the leader election lease")
	flag.StringVar(&f.metricsAddr, "metrics-address", "", "serve /metrics and /healthz on this address (e.g. :10262); empty = off")
	flag.IntVar(&f.threadiness, "threadiness", 4, "claims and volumes handled in parallel")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		klog.ErrorS(err, "azure-disk-provisioner failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
	klog.Flush()
}

func run(ctx context.Context, f flags) error {
	cfg, err := config.LoadFile(f.cloudConfig)
	if err != nil {
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
	rest.UserAgent = "azure-disk-provisioner"
	kube, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodes := factory.Core().V1().Nodes()
	nodeLister := nodes.Lister()
	nodesSynced := nodes.Informer().HasSynced

	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartStructuredLogging(3)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "azure-disk-provisioner"})

	p := provisioner.New(provisioner.Options{Disks: disks.NewClient(clients), SubscriptionID: cfg.SubscriptionID,
		Location: cfg.Location, ResourceGroup: cfg.ResourceGroup, Nodes: nodeLister, Recorder: recorder, Metrics: metrics})

	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for !nodesSynced() {
		select {
		case <-syncCtx.Done():
			return errors.New("node informer did not sync")
		case <-time.After(100 * time.Millisecond):
		}
	}

	if f.metricsAddr != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", legacyregistry.Handler())
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		srv := &http.Server{Addr: f.metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "metrics server")
			}
		}()
		defer srv.Close()
	}

	opts := []func(*controller.ProvisionController) error{
		controller.LeaderElection(f.leaderElect),
		controller.LeaderElectionNamespace(f.leNamespace),
		controller.Threadiness(f.threadiness),
		// A disk must not outlive its PV: the finalizer keeps the PV until the disk is deleted.
		controller.AddFinalizer(true),
	}
	if names := splitNames(f.extraNames); len(names) > 0 {
		opts = append(opts, controller.AdditionalProvisionerNames(names))
	}
	pc := controller.NewProvisionController(ctx, kube, f.name, p, opts...)
	klog.InfoS("Starting azure-disk-provisioner", "name", f.name, "additionalNames", f.extraNames, "location", cfg.Location,
		"resourceGroup", cfg.ResourceGroup, "auth", clients.AuthMethod)
	pc.Run(ctx)
	return nil
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
