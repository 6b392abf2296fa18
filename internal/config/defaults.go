package config

import "strings"

// Defaults of the existing provider (InitializeCloudFromConfig), kept so that azure.json files
// behave the same.
const (
	DefaultHealthProbePort                      = 10256
	DefaultHealthProbePath                      = "/healthz"
	DefaultRouteUpdateIntervalInSeconds         = 30
	DefaultRouteUpdateWaitingInSeconds          = 30
	DefaultBackendPoolUpdateIntervalInSeconds   = 30
	DefaultBackoffRetries                       = 6
	DefaultBackoffDurationSeconds               = 5
	DefaultBackoffExponent                      = 1.5
	DefaultBackoffJitter                        = 1.0
	DefaultUserAgent                            = "azure-ccm"
	DefaultCloudConfigType                      = "merge"
	DefaultVMCacheTTLInSeconds                  = 60
	DefaultLoadBalancerCacheTTLInSeconds        = 120
	DefaultPublicIPCacheTTLInSeconds            = 120
	DefaultNsgCacheTTLInSeconds                 = 120
	DefaultRouteTableCacheTTLInSeconds          = 120
	DefaultPlsCacheTTLInSeconds                 = 120
	DefaultAvailabilitySetsCacheTTLInSeconds    = 600
	DefaultVmssCacheTTLInSeconds                = 600
	DefaultVmssVirtualMachinesCacheTTLInSeconds = 600
	DefaultVmssFlexCacheTTLInSeconds            = 600
	DefaultVmssFlexVMCacheTTLInSeconds          = 600
	DefaultNonVmssUniformNodesCacheTTLInSeconds = 900
)

// SetDefaults fills in every default and normalises case-insensitive enumerations to their
// canonical spelling (so that "Standard" and "standard" compare equal later).
func SetDefaults(c *Config) {
	c.ResourceGroup = strings.ToLower(c.ResourceGroup)
	c.Location = strings.ToLower(strings.ReplaceAll(c.Location, " ", ""))
	c.VMType = canonical(c.VMType, VMTypeVMSS, VMTypeStandard, VMTypeVMSS, VMTypeVMSSFlex)
	c.LoadBalancerSKU = canonical(c.LoadBalancerSKU, LoadBalancerSKUStandard,
		LoadBalancerSKUBasic, LoadBalancerSKUStandard, LoadBalancerSKUService)
	c.LoadBalancerBackendPoolConfigurationType = canonical(c.LoadBalancerBackendPoolConfigurationType,
		BackendPoolNodeIPConfiguration, BackendPoolNodeIPConfiguration, BackendPoolNodeIP, BackendPoolPodIP)
	c.ClusterServiceLoadBalancerHealthProbeMode = canonical(c.ClusterServiceLoadBalancerHealthProbeMode,
		HealthProbeModeServiceNodePort, HealthProbeModeServiceNodePort, HealthProbeModeShared)
	c.PreConfiguredBackendPoolLoadBalancerTypes = canonical(c.PreConfiguredBackendPoolLoadBalancerTypes, "",
		"internal", "external", "all")
	c.CloudConfigType = canonical(c.CloudConfigType, DefaultCloudConfigType, "file", "secret", "merge")
	// EdgeZone is the only extended location type of Microsoft.Network.
	if c.ExtendedLocationName != "" {
		c.ExtendedLocationType = canonical(c.ExtendedLocationType, ExtendedLocationEdgeZone, ExtendedLocationEdgeZone)
	}

	if c.ExcludeMasterFromStandardLB == nil && c.LoadBalancerSKU == LoadBalancerSKUStandard {
		t := true
		c.ExcludeMasterFromStandardLB = &t
	}
	if c.EnableLoadBalancerAdminState == nil {
		t := true
		c.EnableLoadBalancerAdminState = &t
	}
	if c.ClusterServiceSharedLoadBalancerHealthProbePort == 0 {
		c.ClusterServiceSharedLoadBalancerHealthProbePort = DefaultHealthProbePort
	}
	if c.ClusterServiceSharedLoadBalancerHealthProbePath == "" {
		c.ClusterServiceSharedLoadBalancerHealthProbePath = DefaultHealthProbePath
	}
	setInt(&c.RouteUpdateIntervalInSeconds, DefaultRouteUpdateIntervalInSeconds)
	setInt(&c.RouteUpdateWaitingInSeconds, DefaultRouteUpdateWaitingInSeconds)
	setInt(&c.LoadBalancerBackendPoolUpdateIntervalInSeconds, DefaultBackendPoolUpdateIntervalInSeconds)

	if c.CloudProviderBackoff {
		setInt(&c.CloudProviderBackoffRetries, DefaultBackoffRetries)
	} else {
		c.CloudProviderBackoffRetries = 1
	}
	setInt(&c.CloudProviderBackoffDuration, DefaultBackoffDurationSeconds)
	if c.CloudProviderBackoffExponent == 0 {
		c.CloudProviderBackoffExponent = DefaultBackoffExponent
	}
	if c.CloudProviderBackoffJitter == 0 {
		c.CloudProviderBackoffJitter = DefaultBackoffJitter
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}

	setInt(&c.VMCacheTTLInSeconds, DefaultVMCacheTTLInSeconds)
	setInt(&c.LoadBalancerCacheTTLInSeconds, DefaultLoadBalancerCacheTTLInSeconds)
	setInt(&c.PublicIPCacheTTLInSeconds, DefaultPublicIPCacheTTLInSeconds)
	setInt(&c.NsgCacheTTLInSeconds, DefaultNsgCacheTTLInSeconds)
	setInt(&c.RouteTableCacheTTLInSeconds, DefaultRouteTableCacheTTLInSeconds)
	setInt(&c.PlsCacheTTLInSeconds, DefaultPlsCacheTTLInSeconds)
	setInt(&c.AvailabilitySetsCacheTTLInSeconds, DefaultAvailabilitySetsCacheTTLInSeconds)
	setInt(&c.VmssCacheTTLInSeconds, DefaultVmssCacheTTLInSeconds)
	setInt(&c.VmssVirtualMachinesCacheTTLInSeconds, DefaultVmssVirtualMachinesCacheTTLInSeconds)
	setInt(&c.VmssFlexCacheTTLInSeconds, DefaultVmssFlexCacheTTLInSeconds)
	setInt(&c.VmssFlexVMCacheTTLInSeconds, DefaultVmssFlexVMCacheTTLInSeconds)
	setInt(&c.NonVmssUniformNodesCacheTTLInSeconds, DefaultNonVmssUniformNodesCacheTTLInSeconds)
}

func setInt(v *int, def int) {
	if *v == 0 {
		*v = def
	}
}

// canonical returns def for "", the canonical spelling of v if it matches one of allowed
// case-insensitively, or v unchanged (Validate then reports it).
func canonical(v, def string, allowed ...string) string {
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	return v
}
