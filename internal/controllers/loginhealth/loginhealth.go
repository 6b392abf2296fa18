// Package loginhealth is the login-health controller. A leader whose logins fail with a
// configuration error (the login server's certificate not trusted, the credentials refused, an
// unknown tenant) reconciles nothing, and retrying does not heal it: while that lasts, its
// /healthz check fails with the reason, and once it has lasted StepDownAfter the process exits,
// so that the lease expires and a standby replica (perhaps with a fixed configuration) leads.
// Transient failures (an outage, throttling, a timeout) never fail the check: the leader waits
// them out and keeps the lease.
package loginhealth

import (
	"context"
	"fmt"
	"net/http"
	"time"

	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
)

// Name is the controller's name in --controllers and its /healthz check's.
const Name = "login-health"

// DefaultStepDownAfter is --login-step-down-after's default: long enough for a Secret edited by
// mistake to be put right, short enough that a cluster does not go unreconciled for long.
const DefaultStepDownAfter = 2 * time.Minute

// Options configure New.
type Options struct {
	// Misconfigured returns the configuration error logins fail with and since when (nil
	// error: logins work or fail transiently).
	Misconfigured func() (since time.Time, err error)
	// StepDownAfter is how long a configuration error may last before Exit; 0 never exits.
	StepDownAfter time.Duration
	// Exit ends the process (it does not return in production).
	Exit func(error)
	// Period is how often the controller looks (default 5s). Now is its clock (time.Now).
	Period time.Duration
	Now    func() time.Time
}

// Controller is a started login-health controller: its Run exits the process, its Check is the
// /healthz check.
type Controller struct {
	o Options
}

var _ controllerhealthz.UnnamedHealthChecker = (*Controller)(nil)

// New returns the controller; Run starts its watch.
func New(o Options) (*Controller, error) {
	if o.Misconfigured == nil || o.Exit == nil {
		return nil, fmt.Errorf("loginhealth: Misconfigured and Exit are required")
	}
	if o.Period <= 0 {
		o.Period = 5 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Controller{o: o}, nil
}

// Name implements controller.Interface.
func (c *Controller) Name() string { return Name }

// HealthChecker implements controller.HealthCheckable: the app serves Check at
// /healthz/login-health and in /healthz.
func (c *Controller) HealthChecker() controllerhealthz.UnnamedHealthChecker { return c }

// Check fails while logins fail with a configuration error.
func (c *Controller) Check(*http.Request) error {
	since, err := c.o.Misconfigured()
	if err == nil {
		return nil
	}
	return fmt.Errorf("azure login has failed with a configuration error for %s: %w", c.o.Now().Sub(since).Round(time.Second), err)
}

// StepDown says whether a configuration error that began at since has lasted long enough for
// the leader to give up its lease.
func StepDown(now, since time.Time, err error, after time.Duration) bool {
	return err != nil && after > 0 && now.Sub(since) >= after
}

// Run watches the logins until ctx ends, and calls Exit when a configuration error has lasted
// StepDownAfter.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.o.Period)
	defer t.Stop()
	warned := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		since, err := c.o.Misconfigured()
		if err == nil {
			continue
		}
		now := c.o.Now()
		if StepDown(now, since, err, c.o.StepDownAfter) {
			c.o.Exit(fmt.Errorf("azure login has failed with a configuration error for %s (--login-step-down-after %s): "+
				"exiting so that the lease expires and a standby replica leads: %w", now.Sub(since).Round(time.Second), c.o.StepDownAfter, err))
			return
		}
		if !since.Equal(warned) {
			warned = since
			klog.ErrorS(err, "Azure login fails with a configuration error: nothing is reconciled until it is fixed",
				"since", since.UTC().Format(time.RFC3339), "stepDownIn", c.o.StepDownAfter-now.Sub(since))
		}
	}
}
