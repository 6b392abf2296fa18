//go:build !windows

package main

import (
	"context"

	"github.com/spf13/pflag"
)

// addOSFlags adds nothing outside Windows (--windows-service is a Windows flag, as in the
// existing node manager).
func (o *options) addOSFlags(*pflag.FlagSet) {}

// runAsService is only meaningful on Windows.
func runAsService(ctx context.Context, _ bool) (context.Context, error) { return ctx, nil }
