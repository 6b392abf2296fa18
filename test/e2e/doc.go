// Package e2e holds the end-to-end tests: each starts from Kubernetes objects in a real
// kube-apiserver (nodes played by kwok), runs the CCM binary against azsim, and checks the
// Azure state in azsim.
//
// Most tests work: each starts its own cluster and CCM and drives them. One working test leaves
// a two-core machine idle a good part of the time (it waits on its cluster, its CCM and azsim in
// turn), so two run at once: each is slower, the package faster (on two cores, 560 s instead of
// 870 s one at a time). A few tests spend minutes waiting on timers rather than working (token
// lifetimes and login retries, a three-minute login outage, a leader stepping down after a login
// bound, pods joining a service gateway in steps). So every test runs in go test's parallel
// phase: a waiting test calls t.Parallel(), a working test calls working(t), which also takes
// one of the two tokens of working tests, so that the waits overlap the working tests and at
// most two working tests run at a time. hack/test.sh runs the package with a -parallel large
// enough for every test to start at once (a working test waiting for a token holds one of those
// slots). A parallel test must not call t.Setenv or change other process-wide state: the
// migration tests stop their CCM after a phase through its own environment
// (framework.Env.SetCCMEnv). Each test has its own framework.Env (ports are reserved per test,
// see framework.FreePorts).
package e2e
