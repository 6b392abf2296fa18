package cloudconfig

import (
	"context"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// bodyLogLevel is the klog verbosity from which client-go's REST client logs request and
// response bodies (rest.Request's logBody, level 8). A Secret read through it would have its
// data, base64-encoded, in the log.
const bodyLogLevel = 8

// withoutBodyLogs returns ctx with a logger that drops messages at bodyLogLevel and above.
// client-go's REST client logs through the context's logger, so reading the cloud config
// Secret with this context keeps its data out of the log at any -v, while errors and the
// transport's request lines (levels up to 7) still show.
func withoutBodyLogs(ctx context.Context) context.Context {
	l := klog.FromContext(ctx)
	return klog.NewContext(ctx, logr.New(cappedSink{LogSink: l.GetSink(), max: bodyLogLevel - 1}))
}

// cappedSink is a LogSink that disables every verbosity above max.
type cappedSink struct {
	logr.LogSink
	max int
}

// Init does nothing: the wrapped sink was initialised with its own logger, and initialising it
// again would write to a sink other goroutines are using.
func (s cappedSink) Init(logr.RuntimeInfo) {}

func (s cappedSink) Enabled(level int) bool { return level <= s.max && s.LogSink.Enabled(level) }

func (s cappedSink) Info(level int, msg string, kv ...any) {
	if level <= s.max {
		s.LogSink.Info(level, msg, kv...)
	}
}

func (s cappedSink) WithValues(kv ...any) logr.LogSink {
	return cappedSink{LogSink: s.LogSink.WithValues(kv...), max: s.max}
}

func (s cappedSink) WithName(name string) logr.LogSink {
	return cappedSink{LogSink: s.LogSink.WithName(name), max: s.max}
}
