package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Validate checks the configuration after SetDefaults. Every problem is reported, each naming
// the key and the offending value, e.g. `loadBalancerSku: "Premium" is not one of basic,
// standard, service`.
func Validate(c *Config) error {
	var errs []error
	bad := func(key string, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			shown := make([]string, 0, len(allowed))
			for _, a := range allowed {
				if a != "" {
					shown = append(shown, a)
				}
			}
			bad(key, "%s is not one of %s", Quote(v), strings.Join(shown, ", "))
		}
	}

	if c.SubscriptionID == "" {
		bad("subscriptionId", "is required")
	}
	if c.ResourceGroup == "" {
		bad("resourceGroup", "is required")
	}
	if c.Location == "" {
		bad("location", "is required")
	}
	if normalizeCloudName(c.Cloud) == "" {
		bad("cloud", "%s is not one of AzurePublicCloud, AzureChinaCloud, AzureUSGovernmentCloud, AzureStackCloud", Quote(c.Cloud))
	}
	oneOf("vmType", c.VMType, VMTypeStandard, VMTypeVMSS, VMTypeVMSSFlex)
	oneOf("loadBalancerSku", c.LoadBalancerSKU, LoadBalancerSKUBasic, LoadBalancerSKUStandard, LoadBalancerSKUService)
	if c.LoadBalancerSKU == LoadBalancerSKUBasic {
		// Refused rather than quietly served with Standard load balancers: Azure no longer
		// creates Basic ones, and a Standard one could not take the name of a Basic one that is
		// still there.
		bad("loadBalancerSku", "%q is not supported: Azure retired Basic load balancers and no longer creates them; "+
			"set loadBalancerSku to standard (the CCM then moves the cluster's Basic load balancers to Standard once at start, "+
			"keeping every service's IP; see docs/migration-basic-to-standard.md)", c.LoadBalancerSKU)
	}
	oneOf("loadBalancerBackendPoolConfigurationType", c.LoadBalancerBackendPoolConfigurationType,
		BackendPoolNodeIPConfiguration, BackendPoolNodeIP, BackendPoolPodIP)
	oneOf("clusterServiceLoadBalancerHealthProbeMode", c.ClusterServiceLoadBalancerHealthProbeMode,
		HealthProbeModeServiceNodePort, HealthProbeModeShared)
	oneOf("preConfiguredBackendPoolLoadBalancerTypes", c.PreConfiguredBackendPoolLoadBalancerTypes,
		"", "internal", "external", "all")
	oneOf("cloudConfigType", c.CloudConfigType, "file", "secret", "merge")

	if c.ExtendedLocationName == "" && c.ExtendedLocationType != "" {
		bad("extendedLocationType", "%q needs extendedLocationName", c.ExtendedLocationType)
	} else if c.ExtendedLocationName != "" && c.ExtendedLocationType != ExtendedLocationEdgeZone {
		bad("extendedLocationType", "%q is not one of %s", c.ExtendedLocationType, ExtendedLocationEdgeZone)
	}
	if c.DisableAvailabilitySetNodes && c.VMType != VMTypeVMSS {
		bad("disableAvailabilitySetNodes", "true is only valid with vmType vmss, not %s", Quote(c.VMType))
	}
	if c.DisableOutboundSNAT != nil && *c.DisableOutboundSNAT && c.LoadBalancerSKU == LoadBalancerSKUBasic {
		bad("disableOutboundSNAT", "true is not allowed with loadBalancerSku basic")
	}
	if p := c.ClusterServiceSharedLoadBalancerHealthProbePort; p < 1 || p > 65535 {
		bad("clusterServiceSharedLoadBalancerHealthProbePort", "%d is not a port (1-65535)", p)
	}
	if !strings.HasPrefix(c.ClusterServiceSharedLoadBalancerHealthProbePath, "/") {
		bad("clusterServiceSharedLoadBalancerHealthProbePath", "%s must start with /", Quote(c.ClusterServiceSharedLoadBalancerHealthProbePath))
	}
	for key, v := range map[string]int{
		"maximumLoadBalancerRuleCount":                   c.MaximumLoadBalancerRuleCount,
		"putVMSSVMBatchSize":                             c.PutVMSSVMBatchSize,
		"nodeInstanceNotFoundGracePeriodInSeconds":       c.NodeInstanceNotFoundGracePeriodInSeconds,
		"routeUpdateIntervalInSeconds":                   c.RouteUpdateIntervalInSeconds,
		"routeUpdateWaitingInSeconds":                    c.RouteUpdateWaitingInSeconds,
		"loadBalancerBackendPoolUpdateIntervalInSeconds": c.LoadBalancerBackendPoolUpdateIntervalInSeconds,
		"cloudProviderBackoffRetries":                    c.CloudProviderBackoffRetries,
		"cloudProviderBackoffDuration":                   c.CloudProviderBackoffDuration,
		"cloudProviderRateLimitBucket":                   c.CloudProviderRateLimitBucket,
		"cloudProviderRateLimitBucketWrite":              c.CloudProviderRateLimitBucketWrite,
		"vmCacheTTLInSeconds":                            c.VMCacheTTLInSeconds,
		"loadBalancerCacheTTLInSeconds":                  c.LoadBalancerCacheTTLInSeconds,
		"publicIPCacheTTLInSeconds":                      c.PublicIPCacheTTLInSeconds,
		"nsgCacheTTLInSeconds":                           c.NsgCacheTTLInSeconds,
		"routeTableCacheTTLInSeconds":                    c.RouteTableCacheTTLInSeconds,
		"plsCacheTTLInSeconds":                           c.PlsCacheTTLInSeconds,
		"availabilitySetsCacheTTLInSeconds":              c.AvailabilitySetsCacheTTLInSeconds,
		"vmssCacheTTLInSeconds":                          c.VmssCacheTTLInSeconds,
		"vmssVirtualMachinesCacheTTLInSeconds":           c.VmssVirtualMachinesCacheTTLInSeconds,
		"vmssFlexCacheTTLInSeconds":                      c.VmssFlexCacheTTLInSeconds,
		"vmssFlexVMCacheTTLInSeconds":                    c.VmssFlexVMCacheTTLInSeconds,
		"nonVmssUniformNodesCacheTTLInSeconds":           c.NonVmssUniformNodesCacheTTLInSeconds,
	} {
		if v < 0 {
			bad(key, "%d must not be negative", v)
		}
	}
	if c.CloudProviderBackoffExponent < 0 {
		bad("cloudProviderBackoffExponent", "%g must not be negative", c.CloudProviderBackoffExponent)
	}
	if c.CloudProviderBackoffJitter < 0 {
		bad("cloudProviderBackoffJitter", "%g must not be negative", c.CloudProviderBackoffJitter)
	}

	// Several login methods are not an error: the first in the existing provider's order is
	// used (LoginWarning says which). Only what that one needs is checked.
	login, _ := c.LoginMethod()
	switch login.Name {
	case LoginClientSecret, LoginClientCertificate:
		if c.AADClientID == "" {
			bad("aadClientId", "is required with %s", login.Key)
		}
	}
	switch login.Name {
	case LoginClientSecret, LoginClientCertificate, LoginWorkloadIdentity:
		if c.TenantID == "" {
			bad("tenantId", "is required for service principal and workload identity login")
		}
	}
	// A short credential could not be removed from logs and error messages without
	// destroying them (arm.Scrubber skips it), so the one in use is refused instead.
	if n := len(c.AADClientSecret.Value()); login.Name == LoginClientSecret && n < MinSecretLength {
		key := "aadClientSecret"
		if c.secretFromEnv {
			key = EnvClientSecret
		}
		bad(key, "is %d characters long; secrets shorter than %d characters are refused, because they cannot be removed from logs without destroying them", n, MinSecretLength)
	}
	if n := len(c.AADClientCertPassword.Value()); login.Name == LoginClientCertificate && n > 0 && n < MinSecretLength {
		bad("aadClientCertPassword", "is %d characters long; passwords shorter than %d characters are refused, because they cannot be removed from logs without destroying them (an empty password is accepted)", n, MinSecretLength)
	}
	if login.Name == LoginWorkloadIdentity && c.AADFederatedTokenFile == "" {
		bad("aadFederatedTokenFile", "is required with useFederatedWorkloadIdentityExtension (or set AZURE_FEDERATED_TOKEN_FILE)")
	}
	// A managed identity lives in one tenant; the existing provider's way around that, a token
	// kept in Key Vault (auxiliaryTokenProvider), is not supported.
	if c.NetworkResourceTenantID != "" && !strings.EqualFold(c.NetworkResourceTenantID, c.TenantID) && login.Name == LoginManagedIdentity {
		bad("networkResourceTenantID", "%q needs a login that works in both tenants (client secret, certificate or workload identity), not a managed identity", c.NetworkResourceTenantID)
	}
	if c.UserAssignedIdentityID != "" && !c.UseManagedIdentityExtension {
		bad("userAssignedIdentityID", "%s is set but useManagedIdentityExtension is false", Quote(c.UserAssignedIdentityID))
	}
	if c.ResourceManagerEndpoint != "" {
		// The metadata document served there names the login server that receives the client
		// secret or assertion: it must come over a verified TLS connection.
		if err := CheckHTTPSURL(c.ResourceManagerEndpoint); err != nil {
			bad("resourceManagerEndpoint", "%s", err)
		}
	}

	// Service Gateway is all or nothing.
	sg := []bool{c.ServiceGatewayEnabled, c.LoadBalancerBackendPoolConfigurationType == BackendPoolPodIP,
		c.LoadBalancerSKU == LoadBalancerSKUService}
	if slices.Contains(sg, true) && slices.Contains(sg, false) {
		bad("serviceGatewayEnabled", "serviceGatewayEnabled=true, loadBalancerBackendPoolConfigurationType=podIP and loadBalancerSku=service must be set together (got %t, %s, %s)",
			c.ServiceGatewayEnabled, Quote(c.LoadBalancerBackendPoolConfigurationType), Quote(c.LoadBalancerSKU))
	}
	if c.ServiceGatewayEnabled && len(c.MultipleStandardLoadBalancerConfigurations) > 0 {
		bad("multipleStandardLoadBalancerConfigurations", "cannot be used with serviceGatewayEnabled")
	}
	if c.ServiceGatewayEnabled && c.VnetName == "" {
		// Pod backend pools are registered with the gateway under the cluster VNet.
		bad("vnetName", "is required with serviceGatewayEnabled")
	}
	if c.ServiceGatewayEnabled && c.EnableMigrateToIPBasedBackendPoolAPI {
		bad("enableMigrateToIPBasedBackendPoolAPI", "cannot be used with serviceGatewayEnabled")
	}

	errs = append(errs, validateMultiSLB(c)...)
	return errors.Join(errs...)
}

// maxMessage bounds one error message: values are quoted short, but a library's message (a
// label selector's parser) may quote its input.
const maxMessage = 512

func truncateMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}

func validateMultiSLB(c *Config) []error {
	if len(c.MultipleStandardLoadBalancerConfigurations) == 0 {
		return nil
	}
	var errs []error
	const key = "multipleStandardLoadBalancerConfigurations"
	if c.LoadBalancerSKU != LoadBalancerSKUStandard {
		errs = append(errs, fmt.Errorf("%s: requires loadBalancerSku standard, not %s", key, Quote(c.LoadBalancerSKU)))
	}
	if c.LoadBalancerBackendPoolConfigurationType == BackendPoolNodeIPConfiguration {
		errs = append(errs, fmt.Errorf("%s: cannot be used with loadBalancerBackendPoolConfigurationType %s (use nodeIP)",
			key, Quote(c.LoadBalancerBackendPoolConfigurationType)))
	}
	names, vmSets := map[string]bool{}, map[string]bool{}
	for i, m := range c.MultipleStandardLoadBalancerConfigurations {
		n := strings.ToLower(m.Name)
		switch {
		case n == "":
			errs = append(errs, fmt.Errorf("%s[%d].name: is required", key, i))
		case names[n]:
			errs = append(errs, fmt.Errorf("%s[%d].name: %s is used twice", key, i, Quote(m.Name)))
		}
		names[n] = true
		v := strings.ToLower(m.PrimaryVMSet)
		switch {
		case v == "":
			errs = append(errs, fmt.Errorf("%s[%d].primaryVMSet: is required (entry %s)", key, i, Quote(m.Name)))
		case vmSets[v]:
			errs = append(errs, fmt.Errorf("%s[%d].primaryVMSet: %s is used twice", key, i, Quote(m.PrimaryVMSet)))
		}
		vmSets[v] = true
		for sk, sel := range map[string]*metav1.LabelSelector{"serviceLabelSelector": m.ServiceLabelSelector,
			"serviceNamespaceSelector": m.ServiceNamespaceSelector, "nodeSelector": m.NodeSelector} {
			if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
				errs = append(errs, fmt.Errorf("%s[%d].%s: %s (entry %s)", key, i, sk, truncateMessage(err.Error()), Quote(m.Name)))
			}
		}
	}
	return errs
}

// ValidateMultiSLBClusterName checks that multipleStandardLoadBalancerConfigurations (when set)
// has the default entry named like the cluster (--cluster-name), which every service falls back
// to. The cluster name is not part of azure.json, so this runs when the CCM knows it.
func ValidateMultiSLBClusterName(c *Config, clusterName string) error {
	if len(c.MultipleStandardLoadBalancerConfigurations) == 0 {
		return nil
	}
	for _, m := range c.MultipleStandardLoadBalancerConfigurations {
		if strings.EqualFold(m.Name, clusterName) {
			return nil
		}
	}
	return fmt.Errorf("multipleStandardLoadBalancerConfigurations: no entry is named after the cluster %s (--cluster-name); the default load balancer <clusterName> must be configured", Quote(clusterName))
}
