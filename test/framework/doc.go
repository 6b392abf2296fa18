// Package framework runs integration and end-to-end tests against a real Kubernetes control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) whose nodes and pods are
// simulated by KWOK, plus azsim (the local Azure) and the cloud controller manager under test.
//
// A test calls Start, which brings everything up and registers the teardown with t.Cleanup.
// Teardown also happens when the test binary is interrupted or killed: a detached reaper
// process watches the test process and removes the cluster, the CCM and the temp dirs if the
// test process dies without cleaning up.
//
// The Kubernetes and KWOK binaries come from `make tools` (hack/install-tools.sh). Without them
// tests skip, unless CI is set, in which case they fail.
package framework
