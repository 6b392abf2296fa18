package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/azure-ccm/azure-ccm/internal/azsim/client"
	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
)

// Azure is the azsim instance of an environment and the identity the CCM logs in with.
type Azure struct {
	// Server is the in-process azsim (faults, counters, VM actions, Seed).
	Server *server.Server
	// Control is azsim's control API client, the same a separate process would use.
	Control *client.Client
	// URL is azsim's ARM endpoint (also its login and metadata host); IMDSURL its instance
	// metadata endpoint; CAFile the CA that signed its certificate.
	URL, IMDSURL, CAFile string
	// Cloud is the name azsim's metadata document uses; azure.json's `cloud` must match it.
	Cloud string
	// The service principal azsim accepts.
	TenantID, ClientID, ClientSecret string
	// Defaults for azure.json, from the seeded topology.
	SubscriptionID, Location, ResourceGroup, VnetName, VnetResourceGroup, SubnetName string
	SecurityGroupName, RouteTableName, VMType, PrimaryScaleSetName                   string

	close func()
}

// Close stops azsim.
func (a *Azure) Close() {
	if a.close != nil {
		a.close()
	}
}

// CloudConfig is the azure.json a CCM needs to manage this Azure, before test overrides.
func (a *Azure) CloudConfig() map[string]any {
	c := map[string]any{
		"cloud":                   a.Cloud,
		"resourceManagerEndpoint": a.URL,
		"tenantId":                a.TenantID,
		"subscriptionId":          a.SubscriptionID,
		"aadClientId":             a.ClientID,
		"aadClientSecret":         a.ClientSecret,
		"location":                a.Location,
		"resourceGroup":           a.ResourceGroup,
		"vnetName":                a.VnetName,
		"vnetResourceGroup":       a.VnetResourceGroup,
		"subnetName":              a.SubnetName,
		"securityGroupName":       a.SecurityGroupName,
		"routeTableName":          a.RouteTableName,
		"vmType":                  a.VMType,
		"primaryScaleSetName":     a.PrimaryScaleSetName,
		"loadBalancerSku":         "standard",
		"useInstanceMetadata":     false,
	}
	for k, v := range c {
		if s, ok := v.(string); ok && s == "" {
			delete(c, k)
		}
	}
	return c
}

// mergeConfig returns base with overrides applied; an override of nil deletes the key.
func mergeConfig(base, overrides map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(overrides))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range overrides {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// WriteCloudConfig (re)writes the CCM's azure.json from azsim's defaults and overrides. A
// running CCM reads it again only when restarted.
func (e *Env) WriteCloudConfig(overrides map[string]any) error {
	if e.Azure == nil {
		return fmt.Errorf("no azsim in this environment")
	}
	cfg := mergeConfig(e.Azure.CloudConfig(), overrides)
	b, err := json.MarshalIndent(cfg, "", "  ") // map keys come out sorted
	if err != nil {
		return err
	}
	path := filepath.Join(e.Dir, "azure.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	e.CloudConfigPath = path
	return nil
}
