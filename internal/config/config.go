// Package config reads azure.json (the cloud config of the existing Azure cloud provider), fills in
// the same defaults and validates it, so that an existing cluster's file works unchanged.
package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/azure-ccm/azure-ccm/internal/tags"
)

// Values of vmType.
const (
	VMTypeStandard = "standard"
	VMTypeVMSS     = "vmss"
	VMTypeVMSSFlex = "vmssflex"
)

// ExtendedLocationEdgeZone is the extendedLocationType of edge zones (the only one).
const ExtendedLocationEdgeZone = "EdgeZone"

// Values of loadBalancerSku.
const (
	LoadBalancerSKUBasic    = "basic"
	LoadBalancerSKUStandard = "standard"
	LoadBalancerSKUService  = "service"
)

// Values of loadBalancerBackendPoolConfigurationType.
const (
	BackendPoolNodeIPConfiguration = "nodeIPConfiguration"
	BackendPoolNodeIP              = "nodeIP"
	BackendPoolPodIP               = "podIP"
)

// Values of clusterServiceLoadBalancerHealthProbeMode.
const (
	HealthProbeModeServiceNodePort = "servicenodeport"
	HealthProbeModeShared          = "shared"
)

// Config is azure.json. JSON keys are matched case-insensitively (encoding/json semantics), as the
// existing provider does. Every key is documented in docs/configuration.md.
type Config struct {
	// Identity, cloud and auth.
	Cloud                                 string                  `json:"cloud,omitempty"`
	TenantID                              string                  `json:"tenantId,omitempty"`
	SubscriptionID                        string                  `json:"subscriptionId,omitempty"`
	AADClientID                           string                  `json:"aadClientId,omitempty"`
	AADClientSecret                       Secret                  `json:"aadClientSecret,omitempty"`
	AADClientCertPath                     string                  `json:"aadClientCertPath,omitempty"`
	AADClientCertPassword                 Secret                  `json:"aadClientCertPassword,omitempty"`
	UseManagedIdentityExtension           bool                    `json:"useManagedIdentityExtension,omitempty"`
	UserAssignedIdentityID                string                  `json:"userAssignedIdentityID,omitempty"`
	AADFederatedTokenFile                 string                  `json:"aadFederatedTokenFile,omitempty"`
	UseFederatedWorkloadIdentityExtension bool                    `json:"useFederatedWorkloadIdentityExtension,omitempty"`
	AADMSIDataPlaneIdentityPath           string                  `json:"aadMSIDataPlaneIdentityPath,omitempty"`
	IdentitySystem                        string                  `json:"identitySystem,omitempty"`
	NetworkResourceTenantID               string                  `json:"networkResourceTenantID,omitempty"`
	NetworkResourceSubscriptionID         string                  `json:"networkResourceSubscriptionID,omitempty"`
	AuxiliaryTokenProvider                *AuxiliaryTokenProvider `json:"auxiliaryTokenProvider,omitempty"`
	ResourceManagerEndpoint               string                  `json:"resourceManagerEndpoint,omitempty"`
	DisableAzureStackCloud                bool                    `json:"disableAzureStackCloud,omitempty"`
	UserAgent                             string                  `json:"userAgent,omitempty"`
	EnableMinimumRetryAfter               bool                    `json:"enableMinimumRetryAfter,omitempty"`
	CloudConfigType                       string                  `json:"cloudConfigType,omitempty"`

	// Topology.
	ResourceGroup               string `json:"resourceGroup,omitempty"`
	Location                    string `json:"location,omitempty"`
	VnetName                    string `json:"vnetName,omitempty"`
	VnetResourceGroup           string `json:"vnetResourceGroup,omitempty"`
	SubnetName                  string `json:"subnetName,omitempty"`
	SecurityGroupName           string `json:"securityGroupName,omitempty"`
	SecurityGroupResourceGroup  string `json:"securityGroupResourceGroup,omitempty"`
	RouteTableName              string `json:"routeTableName,omitempty"`
	RouteTableResourceGroup     string `json:"routeTableResourceGroup,omitempty"`
	PrimaryAvailabilitySetName  string `json:"primaryAvailabilitySetName,omitempty"`
	PrimaryScaleSetName         string `json:"primaryScaleSetName,omitempty"`
	VMType                      string `json:"vmType,omitempty"`
	DisableAvailabilitySetNodes bool   `json:"disableAvailabilitySetNodes,omitempty"`
	EnableVmssFlexNodes         bool   `json:"enableVmssFlexNodes,omitempty"`
	ExtendedLocationName        string `json:"extendedLocationName,omitempty"`
	ExtendedLocationType        string `json:"extendedLocationType,omitempty"`

	// Load balancer.
	LoadBalancerSKU                                 string                                      `json:"loadBalancerSku,omitempty"`
	LoadBalancerName                                string                                      `json:"loadBalancerName,omitempty"`
	LoadBalancerResourceGroup                       string                                      `json:"loadBalancerResourceGroup,omitempty"`
	ExcludeMasterFromStandardLB                     *bool                                       `json:"excludeMasterFromStandardLB,omitempty"`
	DisableOutboundSNAT                             *bool                                       `json:"disableOutboundSNAT,omitempty"`
	MaximumLoadBalancerRuleCount                    int                                         `json:"maximumLoadBalancerRuleCount,omitempty"`
	LoadBalancerBackendPoolConfigurationType        string                                      `json:"loadBalancerBackendPoolConfigurationType,omitempty"`
	PreConfiguredBackendPoolLoadBalancerTypes       string                                      `json:"preConfiguredBackendPoolLoadBalancerTypes,omitempty"`
	PutVMSSVMBatchSize                              int                                         `json:"putVMSSVMBatchSize,omitempty"`
	EnableMigrateToIPBasedBackendPoolAPI            bool                                        `json:"enableMigrateToIPBasedBackendPoolAPI,omitempty"`
	MultipleStandardLoadBalancerConfigurations      []MultipleStandardLoadBalancerConfiguration `json:"multipleStandardLoadBalancerConfigurations,omitempty"`
	ClusterServiceLoadBalancerHealthProbeMode       string                                      `json:"clusterServiceLoadBalancerHealthProbeMode,omitempty"`
	ClusterServiceSharedLoadBalancerHealthProbePort int32                                       `json:"clusterServiceSharedLoadBalancerHealthProbePort,omitempty"`
	ClusterServiceSharedLoadBalancerHealthProbePath string                                      `json:"clusterServiceSharedLoadBalancerHealthProbePath,omitempty"`
	Tags                                            string                                      `json:"tags,omitempty"`
	TagsMap                                         map[string]string                           `json:"tagsMap,omitempty"`
	SystemTags                                      string                                      `json:"systemTags,omitempty"`
	EnableIPTagMutationForExistingPublicIP          bool                                        `json:"enableIPTagMutationForExistingPublicIP,omitempty"`
	PrivateLinkServiceResourceGroup                 string                                      `json:"privateLinkServiceResourceGroup,omitempty"`
	ServiceGatewayEnabled                           bool                                        `json:"serviceGatewayEnabled,omitempty"`
	EnableLoadBalancerAdminState                    *bool                                       `json:"enableLoadBalancerAdminState,omitempty"`

	// Instances, routes and metadata.
	UseInstanceMetadata                            bool `json:"useInstanceMetadata,omitempty"`
	NodeInstanceNotFoundGracePeriodInSeconds       int  `json:"nodeInstanceNotFoundGracePeriodInSeconds,omitempty"`
	RouteUpdateIntervalInSeconds                   int  `json:"routeUpdateIntervalInSeconds,omitempty"`
	RouteUpdateWaitingInSeconds                    int  `json:"routeUpdateWaitingInSeconds,omitempty"`
	LoadBalancerBackendPoolUpdateIntervalInSeconds int  `json:"loadBalancerBackendPoolUpdateIntervalInSeconds,omitempty"`

	// Backoff and rate limiting.
	CloudProviderBackoff              bool    `json:"cloudProviderBackoff,omitempty"`
	CloudProviderBackoffRetries       int     `json:"cloudProviderBackoffRetries,omitempty"`
	CloudProviderBackoffDuration      int     `json:"cloudProviderBackoffDuration,omitempty"`
	CloudProviderBackoffExponent      float64 `json:"cloudProviderBackoffExponent,omitempty"`
	CloudProviderBackoffJitter        float64 `json:"cloudProviderBackoffJitter,omitempty"`
	CloudProviderRateLimit            bool    `json:"cloudProviderRateLimit,omitempty"`
	CloudProviderRateLimitQPS         float32 `json:"cloudProviderRateLimitQPS,omitempty"`
	CloudProviderRateLimitBucket      int     `json:"cloudProviderRateLimitBucket,omitempty"`
	CloudProviderRateLimitQPSWrite    float32 `json:"cloudProviderRateLimitQPSWrite,omitempty"`
	CloudProviderRateLimitBucketWrite int     `json:"cloudProviderRateLimitBucketWrite,omitempty"`

	// Caches.
	DisableAPICallCache                        bool `json:"disableAPICallCache,omitempty"`
	VMCacheTTLInSeconds                        int  `json:"vmCacheTTLInSeconds,omitempty"`
	LoadBalancerCacheTTLInSeconds              int  `json:"loadBalancerCacheTTLInSeconds,omitempty"`
	PublicIPCacheTTLInSeconds                  int  `json:"publicIPCacheTTLInSeconds,omitempty"`
	NsgCacheTTLInSeconds                       int  `json:"nsgCacheTTLInSeconds,omitempty"`
	RouteTableCacheTTLInSeconds                int  `json:"routeTableCacheTTLInSeconds,omitempty"`
	PlsCacheTTLInSeconds                       int  `json:"plsCacheTTLInSeconds,omitempty"`
	AvailabilitySetsCacheTTLInSeconds          int  `json:"availabilitySetsCacheTTLInSeconds,omitempty"`
	VmssCacheTTLInSeconds                      int  `json:"vmssCacheTTLInSeconds,omitempty"`
	VmssVirtualMachinesCacheTTLInSeconds       int  `json:"vmssVirtualMachinesCacheTTLInSeconds,omitempty"`
	VmssFlexCacheTTLInSeconds                  int  `json:"vmssFlexCacheTTLInSeconds,omitempty"`
	VmssFlexVMCacheTTLInSeconds                int  `json:"vmssFlexVMCacheTTLInSeconds,omitempty"`
	NonVmssUniformNodesCacheTTLInSeconds       int  `json:"nonVmssUniformNodesCacheTTLInSeconds,omitempty"`
	ListVmssVirtualMachinesWithoutInstanceView bool `json:"listVmssVirtualMachinesWithoutInstanceView,omitempty"`

	// federatedFromEnv and secretFromEnv record that AZURE_FEDERATED_TOKEN_FILE turned workload
	// identity on and that AZURE_CLIENT_SECRET set the client secret, so that the login warning
	// names the variable.
	federatedFromEnv, secretFromEnv bool
}

// AuxiliaryTokenProvider names a Key Vault secret holding a token for the network tenant.
type AuxiliaryTokenProvider struct {
	SubscriptionID string `json:"subscriptionID,omitempty"`
	ResourceGroup  string `json:"resourceGroup,omitempty"`
	VaultName      string `json:"vaultName,omitempty"`
	SecretName     string `json:"secretName,omitempty"`
}

// MultipleStandardLoadBalancerConfiguration is one entry of multipleStandardLoadBalancerConfigurations.
type MultipleStandardLoadBalancerConfiguration struct {
	Name                  string `json:"name,omitempty"`
	PrimaryVMSet          string `json:"primaryVMSet,omitempty"`
	AllowServicePlacement *bool  `json:"allowServicePlacement,omitempty"`
	// AutoPlaceServices false: only services naming this entry in the
	// azure-load-balancer-configurations annotation are placed on it (default true).
	AutoPlaceServices        *bool                 `json:"autoPlaceServices,omitempty"`
	ServiceLabelSelector     *metav1.LabelSelector `json:"serviceLabelSelector,omitempty"`
	ServiceNamespaceSelector *metav1.LabelSelector `json:"serviceNamespaceSelector,omitempty"`
	NodeSelector             *metav1.LabelSelector `json:"nodeSelector,omitempty"`
}

// Resource-group helpers: each "...ResourceGroup" key defaults to resourceGroup at use time.

// VnetRG is the resource group of the VNet.
func (c *Config) VnetRG() string { return orDefault(c.VnetResourceGroup, c.ResourceGroup) }

// SecurityGroupRG is the resource group of the cluster NSG.
func (c *Config) SecurityGroupRG() string {
	return orDefault(c.SecurityGroupResourceGroup, c.ResourceGroup)
}

// TagPolicy is tags, tagsMap and systemTags.
func (c *Config) TagPolicy() tags.Policy { return tags.Parse(c.Tags, c.TagsMap, c.SystemTags) }

// RouteTableRG is the resource group of the route table.
func (c *Config) RouteTableRG() string { return orDefault(c.RouteTableResourceGroup, c.ResourceGroup) }

// LoadBalancerRG is the resource group of the cluster's load balancers and public IPs.
func (c *Config) LoadBalancerRG() string {
	return orDefault(c.LoadBalancerResourceGroup, c.ResourceGroup)
}

// PrivateLinkServiceRG is the default resource group of private link services.
func (c *Config) PrivateLinkServiceRG() string {
	return orDefault(c.PrivateLinkServiceResourceGroup, c.ResourceGroup)
}

// NetworkSubscriptionID is the subscription of network resources.
func (c *Config) NetworkSubscriptionID() string {
	return orDefault(c.NetworkResourceSubscriptionID, c.SubscriptionID)
}

// IsStandardSKU reports whether load balancers use the Standard SKU.
func (c *Config) IsStandardSKU() bool { return c.LoadBalancerSKU == LoadBalancerSKUStandard }

// ExcludeMasters reports whether control-plane nodes are kept out of Standard load balancers.
func (c *Config) ExcludeMasters() bool {
	return c.ExcludeMasterFromStandardLB == nil || *c.ExcludeMasterFromStandardLB
}

// AdminStateEnabled reports whether draining nodes get backend admin state Down (default true).
func (c *Config) AdminStateEnabled() bool {
	return c.EnableLoadBalancerAdminState == nil || *c.EnableLoadBalancerAdminState
}

// OutboundSNATDisabled reports whether LB rules disable outbound SNAT.
func (c *Config) OutboundSNATDisabled() bool {
	return c.DisableOutboundSNAT != nil && *c.DisableOutboundSNAT
}

// IsStackCloud reports real Azure Stack mode (old API versions, no zones).
func (c *Config) IsStackCloud() bool {
	return normalizeCloudName(c.Cloud) == cloudAzureStack && !c.DisableAzureStackCloud
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
