package arm

import (
	"net/url"

	"k8s.io/klog/v2"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

// LogLoginEndpoint logs, once at start-up, where the process logs in: the login (Entra ID
// authority) host of the cloud, from the cloud's preset or its metadata document, and the
// tenant. A wrong cloud or tenant is then seen in the first lines of the log instead of being
// guessed from a failed login. Managed identity takes its tokens from the instance metadata
// service; the authority host is logged all the same, with the method. Nothing secret is
// logged; the endpoint is reduced to scheme and host.
func LogLoginEndpoint(env config.Environment, tenant string, method AuthMethod) {
	klog.InfoS("Azure login endpoint", "authorityHost", authorityHost(env.ActiveDirectoryEndpoint),
		"tenant", tenant, "cloud", env.Name, "auth", method)
}

// authorityHost is the endpoint's scheme and host, without user information, path or query.
func authorityHost(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(not a URL)"
	}
	return u.Scheme + "://" + u.Host
}
