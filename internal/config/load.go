package config

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
)

// Environment variables that override azure.json, as in the existing provider.
const (
	EnvTenantID           = "AZURE_TENANT_ID"
	EnvClientID           = "AZURE_CLIENT_ID"
	EnvClientSecret       = "AZURE_CLIENT_SECRET" //nolint:gosec // G101: the variable's name, not a credential
	EnvFederatedTokenFile = "AZURE_FEDERATED_TOKEN_FILE"
	EnvEnvironmentFile    = "AZURE_ENVIRONMENT_FILEPATH"
)

// MaxFileSize bounds azure.json: real files are a few KB (Kubernetes Secrets hold at most 1 MiB),
// and decoding is far larger than the input (a 40 MB file took 1.4 GB), so a wrong file must
// not reach the decoder.
const MaxFileSize = 1 << 20

// LoadFile reads, defaults and validates an azure.json (JSON or YAML) file. The process
// environment supplies the overrides.
func LoadFile(path string) (*Config, error) {
	data, err := readFileLimited(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("reading cloud config %s: %w", path, err)
	}
	cfg, err := Parse(data, os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("cloud config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes azure.json (JSON or YAML, keys case-insensitive), applies the environment
// overrides read through getenv, fills in defaults and validates. The error names every
// offending key and value.
func Parse(data []byte, getenv func(string) string) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the cloud config is %d bytes, larger than the limit of %d", len(data), MaxFileSize)
	}
	cfg := &Config{}
	if err := Decode(data, cfg); err != nil {
		return nil, fmt.Errorf("decoding: %s", truncateMessage(err.Error()))
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	applyEnv(cfg, getenv)
	SetDefaults(cfg)
	if err := Validate(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func applyEnv(cfg *Config, getenv func(string) string) {
	if v := getenv(EnvTenantID); v != "" {
		cfg.TenantID = v
	}
	if v := getenv(EnvClientID); v != "" {
		cfg.AADClientID = v
	}
	if v := getenv(EnvClientSecret); v != "" {
		cfg.AADClientSecret = Secret(v)
		cfg.secretFromEnv = true
	}
	if v := getenv(EnvFederatedTokenFile); v != "" {
		cfg.AADFederatedTokenFile = v
		cfg.UseFederatedWorkloadIdentityExtension = true
		cfg.federatedFromEnv = true
	}
}

// UnknownKeys lists the top-level keys of data that no field of Config reads (compared
// case-insensitively). The existing provider ignores them silently; callers log a warning so
// that a typo such as "loadBalancerSKUs" does not go unnoticed.
func UnknownKeys(data []byte) ([]string, error) {
	var raw map[string]json.RawMessage
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	if err := Decode(data, &raw); err != nil {
		return nil, err
	}
	known := knownKeys()
	var unknown []string
	for k := range raw {
		if !known[strings.ToLower(k)] && !isIgnoredKey(k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return unknown, nil
}

// isIgnoredKey accepts keys the existing provider parses but never applies (per-client rate
// limit objects such as loadBalancerRateLimit), so that they do not raise warnings.
func isIgnoredKey(k string) bool {
	return strings.HasSuffix(strings.ToLower(k), "ratelimit")
}

func knownKeys() map[string]bool {
	keys := map[string]bool{}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys[strings.ToLower(name)] = true
		}
	}
	return keys
}
