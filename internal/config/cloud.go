package config

import (
	"context"
	"encoding/json"
	"errors"
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
				return Environment{}, Invalid(fmt.Errorf("cloud: %s needs the environment variable %s or resourceManagerEndpoint", Quote(c.Cloud), EnvEnvironmentFile))
			}
			return env, nil
		}
		fe, err := readEnvironmentFile(path)
		if err != nil {
			// The file is mounted with the pod: it does not appear or change by waiting.
			return Environment{}, Invalid(err)
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
		return Environment{}, Invalid(fmt.Errorf("cloud %s: no resource manager endpoint or token audience configured", Quote(c.Cloud)))
	}
	return env, nil
}

type environmentFile struct {
	Name                    string `json:"name"`
	ResourceManagerEndpoint string `json:"resourceManagerEndpoint"`
	TokenAudience           string `json:"tokenAudience"`
	ActiveDirectoryEndpoint string `json:"activeDirectoryEndpoint"`
}

// maxEnvironmentFileSize bounds the environment file read (a few hundred bytes in practice).
const maxEnvironmentFileSize = 64 << 10

func readEnvironmentFile(path string) (environmentFile, error) {
	var fe environmentFile
	data, err := readFileLimited(path, maxEnvironmentFileSize)
	if err != nil {
		return fe, fmt.Errorf("%s: %w", EnvEnvironmentFile, err)
	}
	return parseEnvironmentFile(data, path)
}

// parseEnvironmentFile decodes the environment file and checks its endpoints.
func parseEnvironmentFile(data []byte, path string) (environmentFile, error) {
	var fe environmentFile
	if err := json.Unmarshal(data, &fe); err != nil {
		return fe, fmt.Errorf("%s %s: %w", EnvEnvironmentFile, path, describeJSONError(data, err))
	}
	for key, v := range map[string]string{"resourceManagerEndpoint": fe.ResourceManagerEndpoint,
		"activeDirectoryEndpoint": fe.ActiveDirectoryEndpoint} {
		if v == "" {
			continue
		}
		if err := CheckHTTPSURL(v); err != nil {
			return fe, fmt.Errorf("%s %s: %s: %w", EnvEnvironmentFile, path, key, err)
		}
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

// maxMetadataSize bounds the metadata document read (ARM's is about 2 KB).
const maxMetadataSize = 1 << 20

// errRedirect refuses redirects of the metadata GET: the document names the login server, so it
// must come from the configured endpoint itself, not from wherever that endpoint points.
var errRedirect = errors.New("redirects are not followed: the metadata document must be served by the configured endpoint")

func fetchMetadata(ctx context.Context, endpoint, cloudName string, hc *http.Client) (Environment, error) {
	// Checked here too (Validate does it first) because the document decides where the
	// credential goes: it must be read over TLS from the configured host.
	if err := CheckHTTPSURL(endpoint); err != nil {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: %w", err))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	if hc != nil {
		c := *hc
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return errRedirect }
	url := strings.TrimSuffix(endpoint, "/") + "/metadata/endpoints?api-version=2019-05-01"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: %s: %w", Quote(endpoint), err)
	}
	resp, err := client.Do(req)
	if errors.Is(err, errRedirect) {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: fetching %s: %w", url, err))
	}
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.Request == nil || resp.Request.URL.Scheme != "https" || resp.TLS == nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: %s was not answered over TLS", url)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataSize+1))
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: GET %s: HTTP %d", url, resp.StatusCode)
	}
	if len(body) > maxMetadataSize {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: %s is larger than %d bytes", url, maxMetadataSize)
	}
	return environmentFromMetadata(body, url, endpoint, cloudName)
}

// environmentFromMetadata reads the environment named like cloudName out of a metadata document
// fetched from url (of the configured endpoint).
func environmentFromMetadata(body []byte, url, endpoint, cloudName string) (Environment, error) {
	entries, err := decodeMetadata(body)
	if err != nil {
		return Environment{}, fmt.Errorf("resourceManagerEndpoint: decoding %s: %w", url, describeJSONError(body, err))
	}
	e, err := pickMetadata(entries, cloudName)
	if err != nil {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: %s: %w", url, err))
	}
	env := Environment{Name: e.Name, ResourceManagerEndpoint: e.ResourceManager,
		TokenAudience: e.Authentication.Audiences[0], ActiveDirectoryEndpoint: e.Authentication.LoginEndpoint}
	if env.ResourceManagerEndpoint == "" {
		env.ResourceManagerEndpoint = endpoint
	}
	// Both receive credentials: the login server the secret or assertion, ARM the token.
	if env.ActiveDirectoryEndpoint == "" {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: %s: environment %s has no authentication.loginEndpoint", url, Quote(e.Name)))
	}
	if err := CheckHTTPSURL(env.ActiveDirectoryEndpoint); err != nil {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: %s: authentication.loginEndpoint: %w", url, err))
	}
	if err := CheckHTTPSURL(env.ResourceManagerEndpoint); err != nil {
		return Environment{}, Invalid(fmt.Errorf("resourceManagerEndpoint: %s: resourceManager: %w", url, err))
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
		for i, e := range entries {
			if i == 10 {
				names = append(names, fmt.Sprintf("… (%d in all)", len(entries)))
				break
			}
			names = append(names, Quote(e.Name))
		}
		return metadataEntry{}, fmt.Errorf("cloud %s is not among the environments [%s]", Quote(cloudName), strings.Join(names, " "))
	}
	if len(entries[chosen].Authentication.Audiences) == 0 {
		return metadataEntry{}, fmt.Errorf("environment %s has no authentication.audiences", Quote(entries[chosen].Name))
	}
	// The first audience is the token's: an empty one would ask the login server for a token
	// of no resource.
	if strings.TrimSpace(entries[chosen].Authentication.Audiences[0]) == "" {
		return metadataEntry{}, fmt.Errorf("environment %s: authentication.audiences[0] is empty", Quote(entries[chosen].Name))
	}
	return entries[chosen], nil
}
