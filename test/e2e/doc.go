// Package e2e holds the end-to-end tests: each starts from Kubernetes objects in a real
// kube-apiserver (nodes played by kwok), runs the CCM binary against azsim, and checks the
// Azure state in azsim.
//
// Most tests run one after the other: each starts its own cluster and CCM, and two at once on a
// two-core machine slow both. A few spend minutes waiting on timers rather than working (token
// lifetimes and login retries, a three-minute login outage, a leader stepping down after a
// login bound, pods joining a service gateway in steps), so they call t.Parallel(): Go runs them after every sequential test of the package
// has finished, at most -parallel (GOMAXPROCS by default) at a time, and their waits overlap.
// A parallel test must not call t.Setenv or change other process-wide state; each has its own
// framework.Env (ports are reserved per test, see framework.FreePorts).
package e2e
