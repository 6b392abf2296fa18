//go:build windows

package windowsservice

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"golang.org/x/sys/windows/svc"
	"k8s.io/klog/v2"
)

// AddFlag registers --windows-service, bound to enabled.
func AddFlag(fs *pflag.FlagSet, enabled *bool) {
	fs.BoolVar(enabled, "windows-service", *enabled,
		"Run under the Windows Service Control Manager (stopping the service stops the node manager).")
}

// Run hands the process to the Windows Service Control Manager when enabled, under the
// service name given: the returned context ends when the service is stopped or the machine
// shuts down. A process the Service Control Manager did not start is refused.
func Run(ctx context.Context, name string, enabled bool) (context.Context, error) {
	if !enabled {
		return ctx, nil
	}
	isService, err := svc.IsWindowsService()
	if err != nil {
		return nil, fmt.Errorf("--windows-service: %w", err)
	}
	if !isService {
		return nil, fmt.Errorf("--windows-service: the process was not started by the Service Control Manager")
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		if err := svc.Run(name, handler{stop: cancel}); err != nil {
			klog.ErrorS(err, "Windows service ended with an error", "service", name)
		}
		cancel()
	}()
	return ctx, nil
}

type handler struct{ stop context.CancelFunc }

// Execute implements svc.Handler: running until Stop or Shutdown.
func (h handler) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (bool, uint32) {
	status <- svc.Status{State: svc.Running, Accepts: svc.AcceptStop | svc.AcceptShutdown}
	for r := range requests {
		switch r.Cmd {
		case svc.Interrogate:
			status <- r.CurrentStatus
		case svc.Stop, svc.Shutdown:
			status <- svc.Status{State: svc.StopPending}
			h.stop()
			return false, 0
		}
	}
	return false, 0
}
