// Command azure-cloud-node-manager is the node-side agent: it reads the instance metadata
// service (IMDS) of the VM it runs on and initialises its own Node (providerID, zone, region
// and instance-type labels, addresses; it removes the uninitialized taint). It needs no ARM
// access, so clusters whose CCM does not run the cloud-node controller
// (--controllers=*,-cloud-node) still get initialised nodes.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/nodes"
)

type options struct {
	kubeconfig   string
	master       string
	nodeName     string
	imdsEndpoint string
	period       time.Duration
	betaLabels   bool
	removeTaint  bool
	once         bool
	qps          float64
	burst        int
}

func main() {
	o := options{}
	host, _ := os.Hostname()
	klog.InitFlags(nil)
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig (empty: in-cluster config).")
	flag.StringVar(&o.master, "master", "", "API server address (overrides the kubeconfig).")
	flag.StringVar(&o.nodeName, "node-name", host, "Name of the Node object of this VM.")
	flag.StringVar(&o.imdsEndpoint, "imds-endpoint", "http://169.254.169.254", "Instance metadata service endpoint.")
	flag.DurationVar(&o.period, "node-status-update-frequency", time.Minute, "How often the Node is reconciled with IMDS.")
	flag.BoolVar(&o.betaLabels, "enable-deprecated-beta-topology-labels", false, "Also write failure-domain.beta.kubernetes.io/* and beta.kubernetes.io/instance-type.")
	flag.BoolVar(&o.removeTaint, "remove-uninitialized-taint", true, "Remove node.cloudprovider.kubernetes.io/uninitialized once the Node is initialised.")
	flag.BoolVar(&o.once, "once", false, "Initialise the Node once and exit.")
	flag.Float64Var(&o.qps, "kube-api-qps", 20, "QPS to the API server.")
	flag.IntVar(&o.burst, "kube-api-burst", 30, "Burst to the API server.")
	flag.Parse()
	if o.nodeName == "" {
		klog.Fatal("--node-name is required (the hostname is unknown)")
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "Node manager failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	rc, err := clientcmd.BuildConfigFromFlags(o.master, o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = float32(o.qps), o.burst
	rc.UserAgent = "azure-cloud-node-manager"
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// IMDS must be reached directly, never through a proxy.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	sync := func(ctx context.Context) error { return syncNode(ctx, kube, hc, o) }
	if o.once {
		return wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: time.Minute},
			func(ctx context.Context) (bool, error) {
				if err := sync(ctx); err != nil {
					klog.ErrorS(err, "Initialising node failed; retrying", "node", o.nodeName)
					return false, nil
				}
				return true, nil
			})
	}
	// Retry quickly until the first success, then every period.
	backoff := time.Second
	for {
		err := sync(ctx)
		next := o.period
		if err != nil {
			klog.ErrorS(err, "Initialising node failed; retrying", "node", o.nodeName, "retryIn", backoff)
			next = backoff
			if backoff *= 2; backoff > o.period {
				backoff = o.period
			}
		} else {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

func syncNode(ctx context.Context, kube kubernetes.Interface, hc *http.Client, o options) error {
	doc, err := nodes.FetchIMDS(ctx, hc, o.imdsEndpoint)
	if err != nil {
		return err
	}
	md, err := nodes.MetadataFromIMDS(doc, o.nodeName)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, o.nodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s does not exist yet", o.nodeName)
		}
		if err != nil {
			return err
		}
		if node.Spec.ProviderID != "" && node.Spec.ProviderID != md.ProviderID {
			klog.InfoS("Warning: node providerID differs from this VM's; leaving it", "node", o.nodeName,
				"providerID", node.Spec.ProviderID, "imdsProviderID", md.ProviderID)
		}
		updated, specChanged, statusChanged := nodes.ApplyMetadata(node, md, nodes.InitOptions{
			BetaLabels: o.betaLabels, RemoveUninitializedTaint: o.removeTaint})
		if statusChanged {
			// Addresses first: once the taint is gone, pods may rely on them.
			st, err := kube.CoreV1().Nodes().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			updated.ResourceVersion = st.ResourceVersion
		}
		if specChanged {
			if _, err := kube.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
				return err
			}
			klog.InfoS("Node initialised from instance metadata", "node", o.nodeName, "providerID", updated.Spec.ProviderID,
				"zone", md.Zone, "region", md.Region, "instanceType", md.InstanceType)
		}
		return nil
	})
}
