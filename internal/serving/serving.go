// Package serving is the secure port of a program that is not built on the cloud-provider app
// (the disk provisioner): HTTPS with a self-signed certificate unless one is given, and the
// delegated authentication and authorization of Kubernetes components — a client certificate
// signed by the cluster CA or a bearer token, checked with the API server (TokenReview,
// SubjectAccessReview) — so that /metrics is never readable by anyone who can reach the port.
// Some paths (/healthz for the kubelet's probes) are always allowed.
package serving

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server"
	apiserveroptions "k8s.io/apiserver/pkg/server/options"
	genericcontrollermanager "k8s.io/controller-manager/app"
)

// Options are the secure port's flags.
type Options struct {
	Secure *apiserveroptions.SecureServingOptions
	Authn  *apiserveroptions.DelegatingAuthenticationOptions
	Authz  *apiserveroptions.DelegatingAuthorizationOptions
}

// NewOptions serves on port (0: off) with a certificate generated in memory named pairName,
// always allowing the given paths.
func NewOptions(port int, pairName string, alwaysAllow ...string) *Options {
	s := apiserveroptions.NewSecureServingOptions()
	s.BindPort = port
	s.ServerCert.CertDirectory = ""
	s.ServerCert.PairName = pairName
	authn := apiserveroptions.NewDelegatingAuthenticationOptions()
	// Outside a cluster (tests) the flags name the kubeconfig; in a pod the in-cluster config.
	authn.RemoteKubeConfigFileOptional = true
	authz := apiserveroptions.NewDelegatingAuthorizationOptions().WithAlwaysAllowPaths(alwaysAllow...)
	authz.RemoteKubeConfigFileOptional = true
	return &Options{Secure: s, Authn: authn, Authz: authz}
}

// AddFlags adds --secure-port, --bind-address, --tls-cert-file …, --authentication-kubeconfig,
// --authorization-kubeconfig, --authorization-always-allow-paths and their companions.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Secure.AddFlags(fs)
	o.Authn.AddFlags(fs)
	o.Authz.AddFlags(fs)
}

// Serve serves h behind authentication and authorization until ctx ends. It returns once the
// port listens (nil channel when the port is 0); the channel closes when serving stopped.
func (o *Options) Serve(ctx context.Context, h http.Handler) (<-chan struct{}, error) {
	if o.Secure.BindPort == 0 && o.Secure.Listener == nil {
		return nil, nil
	}
	if err := o.Secure.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("secure port certificate: %w", err)
	}
	var info *server.SecureServingInfo
	if err := o.Secure.ApplyTo(&info); err != nil {
		return nil, fmt.Errorf("secure port: %w", err)
	}
	var authn server.AuthenticationInfo
	if err := o.Authn.ApplyTo(&authn, info, nil); err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	var authz server.AuthorizationInfo
	if err := o.Authz.ApplyTo(&authz); err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	stopped, _, err := info.Serve(genericcontrollermanager.BuildHandlerChain(h, &authz, &authn), 0, ctx.Done())
	if err != nil {
		return nil, fmt.Errorf("secure port: %w", err)
	}
	return stopped, nil
}
