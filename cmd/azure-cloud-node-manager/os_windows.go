//go:build windows

package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"golang.org/x/sys/windows/svc"
	"k8s.io/klog/v2"
)

// serviceName is the Windows service name the node manager registers under.
const serviceName = "azure-cloud-node-manager"

func (o *options) addOSFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.windowsService, "windows-service", o.windowsService,
		"Run under the Windows Service Control Manager (stopping the service stops the node manager).")
}

// runAsService hands the process to the Windows Service Control Manager when asked: the
// returned context ends when the service is stopped or the machine shuts down.
func runAsService(ctx context.Context, enabled bool) (context.Context, error) {
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
		if err := svc.Run(serviceName, handler{stop: cancel}); err != nil {
			klog.ErrorS(err, "Windows service ended with an error")
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
