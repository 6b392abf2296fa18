package config

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
)

const (
	cloudPublic     = "AzurePublicCloud"
	cloudChina      = "AzureChinaCloud"
	cloudUSGov      = "AzureUSGovernmentCloud"
	cloudAzureStack = "AzureStackCloud"
)

// normalizeCloudName maps the accepted spellings of `cloud` to one name; "" means unknown.
func normalizeCloudName(name string) string {
	switch strings.ToUpper(strings.TrimSpace(name)) {
	case "", "AZURECLOUD", "AZUREPUBLICCLOUD":
		return cloudPublic
	case "AZURECHINACLOUD":
		return cloudChina
	case "AZUREUSGOVERNMENT", "AZUREUSGOVERNMENTCLOUD":
		return cloudUSGov
	case "AZURESTACKCLOUD":
		return cloudAzureStack
	}
	return ""
}

// Environment is the set of endpoints the CCM talks to.
type Environment struct {
	Name                    string
	ResourceManagerEndpoint string
	TokenAudience           string
	ActiveDirectoryEndpoint string
}

// CloudConfiguration converts the environment into azcore's form, shared by the credential and
// every ARM client.
func (e Environment) CloudConfiguration() cloud.Configuration {
	return cloud.Configuration{
		ActiveDirectoryAuthorityHost: e.ActiveDirectoryEndpoint,
		Services: map[cloud.ServiceName]cloud.ServiceConfiguration{
			cloud.ResourceManager: {Endpoint: e.ResourceManagerEndpoint, Audience: e.TokenAudience},
		},
	}
}

// ResolveEnvironment picks the endpoints: the preset for `cloud`; with cloud AzureStackCloud the
// file named by AZURE_ENVIRONMENT_FILEPATH; with resourceManagerEndpoint the ARM metadata
// document (GET <endpoint>/metadata/endpoints?api-version=2019-05-01, fetched once). hc is used
// for the metadata GET (nil: a client with a 30s timeout and the system trust store).
func ResolveEnvironment(ctx context.Context, c *Config, getenv func(string) string, hc *http.Client) (Environment, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	name := normalizeCloudName(c.Cloud)
	var env Environment
	switch name {
	case cloudChina:
		env = Environment{name, "https://management.chinacloudapi.cn/", "https://management.core.chinacloudapi.cn/", cloud.AzureChina.ActiveDirectoryAuthorityHost}
	case cloudUSGov:
		env = Environment{name, "https://management.usgovcloudapi.net/", "https://management.core.usgovcloudapi.net/", cloud.AzureGovernment.ActiveDirectoryAuthorityHost}
	default:
		env = Environment{name, "https://management.azure.com/", "https://management.core.windows.net/", cloud.AzurePublic.ActiveDirectoryAuthorityHost}
	}

	if c.ResourceManagerEndpoint != "" {
		md, err := fetchMetadata(ctx, c.ResourceManagerEndpoint, c.Cloud, hc)
		if err != nil {
			return Environment{}, err
		}
		env = md
	}

	if name == cloudAzureStack {
		path := getenv(EnvEnvironmentFile)
		if path == "" {
			if c.ResourceManagerEndpoint == "" {
				return Environment{}, fmt.Errorf("cloud: %q needs the environment variable %s or resourceManagerEndpoint", c.Cloud, EnvEnvironmentFile)
			}
			return env, nil
		}
		fe, err := readEnvironmentFile(path)
		if err != nil {
			return Environment{}, err
		}
		// As in the existing provider, ARM is overridden only when both values are present.
		if fe.ResourceManagerEndpoint != "" && fe.TokenAudience != "" {
			env.ResourceManagerEndpoint, env.TokenAudience = fe.ResourceManagerEndpoint, fe.TokenAudience
		}
		if fe.ActiveDirectoryEndpoint != "" {
			env.ActiveDirectoryEndpoint = fe.ActiveDirectoryEndpoint
		}
		if fe.Name != "" {
			env.Name = fe.Name
		}
	}
	if env.ResourceManagerEndpoint == "" || env.TokenAudience == "" {
		return Environment{}, fmt.Errorf("cloud %q: no resource manager endpoint or token audience configured", c.Cloud)
	}
	return env, nil
}

type environmentFile struct {
	Name                    string `json:"name"`
	ResourceManagerEndpoint string `json:"resourceManagerEndpoint"`
	TokenAudience           string `json:"tokenAudience"`
	ActiveDirectoryEndpoint string `json:"activeDirectoryEndpoint"`
}

func readEnvironmentFile(path string) (environmentFile, error) {
	var fe environmentFile
	data, err := os.ReadFile(path)
	if err != nil {
		return fe, fmt.Errorf("%s: %w", EnvEnvironmentFile, err)
	}
	if err := json.Unmarshal(data, &fe); err != nil {
		return fe, fmt.Errorf("%s %s: %w", EnvEnvironmentFile, path, err)
	}
	return fe, nil
}

type metadataEntry struct {
	Name            string `json:"name"`
	ResourceManager string `json:"resourceManager"`
	Authentication  struct {
		Audiences     []string `json:"audiences"`
		LoginEndpoint string   `json:"loginEndpoint"`
	} `json:"authentication"`
}

func fetchMetadata(ctx context.Context, endpoint, cloudName string, hc *http.Client) (Environment, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	url := strings.TrimSuffix(endpoint, "/") + "/metadata/endpoints?api-version=2019-05-01"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: %q: %w", endpoint, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: GET %s: HTTP %d", url, resp.StatusCode)
	}
	entries, err := decodeMetadata(body)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: decoding %s: %w", url, err)
	}
	e, err := pickMetadata(entries, cloudName)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: %s: %w", url, err)
	}
	env := Environment{Name: e.Name, ResourceManagerEndpoint: e.ResourceManager,
		TokenAudience: e.Authentication.Audiences[0], ActiveDirectoryEndpoint: e.Authentication.LoginEndpoint}
	if env.ResourceManagerEndpoint == "" {
		env.ResourceManagerEndpoint = endpoint
	}
	return env, nil
}

// decodeMetadata accepts the array form ARM returns and, leniently, a single object.
func decodeMetadata(body []byte) ([]metadataEntry, error) {
	var entries []metadataEntry
	if err := json.Unmarshal(body, &entries); err == nil {
		return entries, nil
	}
	var one metadataEntry
	if err := json.Unmarshal(body, &one); err != nil {
		return nil, err
	}
	return []metadataEntry{one}, nil
}

// pickMetadata chooses the entry named like `cloud` (the first one when cloud is empty, or the
// only one). Unlike the existing provider it never silently ignores a mismatch and never panics
// on an empty audience list.
func pickMetadata(entries []metadataEntry, cloudName string) (metadataEntry, error) {
	if len(entries) == 0 {
		return metadataEntry{}, fmt.Errorf("no environments in the metadata document")
	}
	chosen := -1
	if cloudName == "" || len(entries) == 1 {
		chosen = 0
	}
	for i, e := range entries {
		if cloudName != "" && strings.EqualFold(e.Name, cloudName) {
			chosen = i
			break
		}
	}
	if chosen < 0 {
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			names = append(names, e.Name)
		}
		return metadataEntry{}, fmt.Errorf("cloud %q is not among the environments %v", cloudName, names)
	}
	if len(entries[chosen].Authentication.Audiences) == 0 {
		return metadataEntry{}, fmt.Errorf("environment %q has no authentication.audiences", entries[chosen].Name)
	}
	return entries[chosen], nil
}
