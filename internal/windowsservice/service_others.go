//go:build !windows

package windowsservice

import (
	"context"

	"github.com/spf13/pflag"
)

// AddFlag adds nothing outside Windows: --windows-service is a Windows flag, as in the
// existing node manager.
func AddFlag(*pflag.FlagSet, *bool) {}

// Run returns ctx unchanged: only Windows has a Service Control Manager.
func Run(ctx context.Context, _ string, _ bool) (context.Context, error) { return ctx, nil }
