package cloudconfig

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Event reasons, recorded on the Secret when it is one of the sources (a file has no object to
// carry events: the log line and the metric are all there is).
const (
	ReasonReloaded     = "CloudConfigReloaded"
	ReasonInvalid      = "CloudConfigInvalid"
	ReasonReloadFailed = "CloudConfigReloadFailed"
)

// Result values of the reloads metric.
const (
	ResultSuccess = "success"
	ResultInvalid = "invalid"
	ResultFailed  = "failed"
)

// DefaultFilePoll is how often the file is read to find changes. Polling, not inotify: a
// mounted ConfigMap or Secret changes by a symlink swap that file watches easily miss.
const DefaultFilePoll = 5 * time.Second

var (
	reloads = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "azure_ccm", Subsystem: "cloud_config", Name: "reloads_total", StabilityLevel: metrics.ALPHA,
		Help: "Changes of the cloud config (file or Secret) seen with --enable-dynamic-reloading, by result: success (the cloud and its controllers restarted on it), invalid (refused, the running config stays), failed (valid, but the new cloud could not start; the running config stays).",
	}, []string{"result"})
	registerOnce sync.Once
)

// RegisterMetrics adds the metrics to the legacy registry served on /metrics (idempotent).
func RegisterMetrics() { registerOnce.Do(func() { legacyregistry.MustRegister(reloads) }) }

// ApplyFunc starts using a new, valid configuration. An error refuses it: the running one stays.
type ApplyFunc func(ctx context.Context, l Loaded) error

// Watcher watches the sources and applies each valid change.
type Watcher struct {
	Source   Source
	Apply    ApplyFunc
	Recorder record.EventRecorder
	// FilePoll is the file's polling period (0: DefaultFilePoll).
	FilePoll time.Duration
	// WatchSecret watches the Secret (when the file's cloudConfigType is not file, or there is
	// no file).
	WatchSecret bool

	trigger chan struct{}
	// applied is the configuration in use; refused the last one refused (reported once).
	applied, refused []byte
}

// Run watches until ctx ends. current is the document in use.
func (w *Watcher) Run(ctx context.Context, current []byte) {
	RegisterMetrics()
	w.trigger = make(chan struct{}, 1)
	w.applied = current
	if w.WatchSecret && w.Source.Kube != nil {
		w.watchSecret(ctx)
	}
	if w.Source.File != "" {
		go w.pollFile(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.trigger:
			w.check(ctx)
		}
	}
}

func (w *Watcher) poke() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

func (w *Watcher) watchSecret(ctx context.Context) {
	f := informers.NewSharedInformerFactoryWithOptions(w.Source.Kube, 0, informers.WithNamespace(w.Source.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", w.Source.Name).String()
		}))
	inf := f.Core().V1().Secrets().Informer()
	// A new informer that was never started takes handlers; an error here would mean the
	// Secret is no longer watched, so say so.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.poke() },
		UpdateFunc: func(any, any) { w.poke() },
		DeleteFunc: func(any) { w.poke() },
	}); err != nil {
		klog.ErrorS(err, "Not watching the cloud config Secret; changes to it are seen only on restart", "secret", klog.KRef(w.Source.Namespace, w.Source.Name))
		return
	}
	// The informer lists the Secret through the REST client, which logs bodies at -v=8.
	f.StartWithContext(withoutBodyLogs(ctx))
}

func (w *Watcher) pollFile(ctx context.Context) {
	period := w.FilePoll
	if period <= 0 {
		period = DefaultFilePoll
	}
	last, _ := readFile(w.Source.File)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			b, err := readFile(w.Source.File)
			if err != nil {
				klog.ErrorS(err, "Cannot read the cloud config file; the running configuration stays", "file", w.Source.File)
				continue
			}
			if !bytes.Equal(b, last) {
				last = b
				w.poke()
			}
		}
	}
}

// check reads the sources and applies a changed, valid configuration.
func (w *Watcher) check(ctx context.Context) {
	l, err := w.Source.Load(ctx)
	if err != nil {
		if l.Data != nil && bytes.Equal(l.Data, w.refused) {
			return
		}
		w.refused = l.Data
		reloads.WithLabelValues(ResultInvalid).Inc()
		klog.ErrorS(err, "Cloud config change refused; the running configuration stays", "secret", w.Source.Namespace+"/"+w.Source.Name, "file", w.Source.File)
		w.event(l.Secret, v1.EventTypeWarning, ReasonInvalid, "Cloud config change refused, the running configuration stays: %v", err)
		return
	}
	if bytes.Equal(l.Data, w.applied) {
		return
	}
	klog.InfoS("Cloud config changed; restarting the cloud and its controllers", "origin", l.Origin)
	if err := w.Apply(ctx, l); err != nil {
		w.refused = l.Data
		reloads.WithLabelValues(ResultFailed).Inc()
		klog.ErrorS(err, "New cloud config could not be applied; the running configuration stays", "origin", l.Origin)
		w.event(l.Secret, v1.EventTypeWarning, ReasonReloadFailed, "The new cloud config is valid but could not be applied, the running configuration stays: %v", err)
		return
	}
	w.applied, w.refused = l.Data, nil
	reloads.WithLabelValues(ResultSuccess).Inc()
	klog.InfoS("Cloud config reloaded", "origin", l.Origin)
	w.event(l.Secret, v1.EventTypeNormal, ReasonReloaded, "Cloud config reloaded from %s; the cloud and its controllers restarted", l.Origin)
}

func (w *Watcher) event(s *v1.Secret, typ, reason, format string, args ...any) {
	if s == nil || w.Recorder == nil {
		return
	}
	w.Recorder.Event(s, typ, reason, fmt.Sprintf(format, args...))
}
