// Package client talks to a running azsim's control API (tests, benchmarks, the azsim CLI).
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/azsim/control"
	"github.com/azure-ccm/azure-ccm/internal/azsim/drift"
	"github.com/azure-ccm/azure-ccm/internal/azsim/identity"
	"github.com/azure-ccm/azure-ccm/internal/azsim/middleware"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// Re-exported types, so callers need only this package.
type (
	Stats        = middleware.Stats
	Fault        = middleware.Fault
	LatencyModel = middleware.LatencyModel
	LatencyRule  = middleware.LatencyRule
	Throttle     = middleware.ThrottleModel
	Info         = control.Info
	VMAction     = control.VMAction
	// ConnectionAction is a private endpoint connection decision.
	ConnectionAction = control.ConnectionAction
	// DriftRequest is a third party's edit of a resource; DriftResult what it wrote.
	DriftRequest = drift.Request
	DriftResult  = drift.Result
	// LoginCount is how many tokens azsim issued to one identity by one login method.
	LoginCount = identity.LoginCount
)

// Client is a control API client.
type Client struct {
	base string
	http *http.Client
}

// New returns a client for the azsim at baseURL (https://127.0.0.1:port). caFile is the
// azsim CA to trust ("" uses the system roots, e.g. with SSL_CERT_FILE set).
func New(baseURL, caFile string) (*Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("azsim client: reading CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("azsim client: %s holds no certificate", caFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return NewWithHTTPClient(baseURL, &http.Client{Transport: tr, Timeout: 5 * time.Minute}), nil
}

// NewWithHTTPClient uses hc for every call.
func NewWithHTTPClient(baseURL string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(baseURL, "/"), http: hc}
}

// APIError is a refusal from the control API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("azsim: %d: %s", e.Status, e.Message) }

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		if raw, ok := in.([]byte); ok {
			body = bytes.NewReader(raw)
		} else {
			b, err := json.Marshal(in)
			if err != nil {
				return err
			}
			body = bytes.NewReader(b)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+strings.TrimSuffix(control.Prefix, "/")+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("azsim: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e control.Error
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = b
		return nil
	}
	return json.Unmarshal(b, out)
}

// Info describes the server.
func (c *Client) Info(ctx context.Context) (Info, error) {
	var i Info
	err := c.call(ctx, http.MethodGet, "/info", nil, &i)
	return i, err
}

// Seed builds a topology and returns its machines.
func (c *Client) Seed(ctx context.Context, t *topology.Topology) (*topology.Result, error) {
	var res topology.Result
	if err := c.call(ctx, http.MethodPost, "/seed", t, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// SeedYAML seeds a topology given as YAML or JSON text.
func (c *Client) SeedYAML(ctx context.Context, doc []byte) (*topology.Result, error) {
	var res topology.Result
	if err := c.call(ctx, http.MethodPost, "/seed", doc, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Reset drops every resource, fault rule and counter.
func (c *Client) Reset(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/reset", nil, nil)
}

// AddFault installs a fault rule and returns it with its ID.
func (c *Client) AddFault(ctx context.Context, f Fault) (Fault, error) {
	var got Fault
	err := c.call(ctx, http.MethodPost, "/faults", f, &got)
	return got, err
}

// Faults lists the fault rules with their hit counts.
func (c *Client) Faults(ctx context.Context) ([]Fault, error) {
	var fs []Fault
	err := c.call(ctx, http.MethodGet, "/faults", nil, &fs)
	return fs, err
}

// RemoveFault drops one rule.
func (c *Client) RemoveFault(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/faults/"+url.PathEscape(id), nil, nil)
}

// ClearFaults drops every rule.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/faults", nil, nil)
}

// SetLatency replaces the latency model.
func (c *Client) SetLatency(ctx context.Context, m LatencyModel) error {
	return c.call(ctx, http.MethodPut, "/latency", m, nil)
}

// SetThrottle replaces the throttling model.
func (c *Client) SetThrottle(ctx context.Context, m Throttle) error {
	return c.call(ctx, http.MethodPut, "/throttle", m, nil)
}

// Throttle returns the throttling model.
func (c *Client) Throttle(ctx context.Context) (Throttle, error) {
	var m Throttle
	err := c.call(ctx, http.MethodGet, "/throttle", nil, &m)
	return m, err
}

// Stats returns the ARM request counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.call(ctx, http.MethodGet, "/stats", nil, &s)
	return s, err
}

// Logins returns the tokens azsim issued, by login method and client ID.
func (c *Client) Logins(ctx context.Context) ([]LoginCount, error) {
	var l []LoginCount
	err := c.call(ctx, http.MethodGet, "/logins", nil, &l)
	return l, err
}

// ResetLogins forgets the tokens issued so far.
func (c *Client) ResetLogins(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/logins", nil, nil)
}

// ResetStats zeroes the counters.
func (c *Client) ResetStats(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/stats", nil, nil)
}

// Metrics returns the Prometheus text exposition.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var b []byte
	err := c.call(ctx, http.MethodGet, "/metrics", nil, &b)
	return string(b), err
}

// Get returns a resource (or child resource) by ID.
func (c *Client) Get(ctx context.Context, id string) (map[string]any, error) {
	var m map[string]any
	err := c.call(ctx, http.MethodGet, "/resource?id="+url.QueryEscape(id), nil, &m)
	return m, err
}

// List returns every resource of a full type, e.g. "Microsoft.Network/loadBalancers".
func (c *Client) List(ctx context.Context, resourceType string) ([]map[string]any, error) {
	var page struct {
		Value []map[string]any `json:"value"`
	}
	err := c.call(ctx, http.MethodGet, "/resources?type="+url.QueryEscape(resourceType), nil, &page)
	return page.Value, err
}

// SetIMDSDefaultVM chooses the VM IMDS answers for when a request names none.
func (c *Client) SetIMDSDefaultVM(ctx context.Context, vm string) error {
	return c.call(ctx, http.MethodPut, "/imds/default-vm", control.DefaultVM{VM: vm}, nil)
}

// VMAction deletes, deallocates, stops, starts or restarts a VM or scale set instance by ID.
func (c *Client) VMAction(ctx context.Context, id, action string) error {
	return c.call(ctx, http.MethodPost, "/vm-action", VMAction{ID: id, Action: action}, nil)
}

// ConnectionAction approves, rejects or removes (action "approve", "reject", "remove") a
// private endpoint connection of a private link service by its ID, as the service's owner.
func (c *Client) ConnectionAction(ctx context.Context, id, action, description string) error {
	return c.call(ctx, http.MethodPost, "/private-endpoint-connection", ConnectionAction{ID: id, Action: action, Description: description}, nil)
}

// Drift applies a third party's edit (delete a rule, change a probe, remove an NSG rule or a
// pool member, change a frontend's public IP) through ARM, as another client would.
func (c *Client) Drift(ctx context.Context, r DriftRequest) (DriftResult, error) {
	var out DriftResult
	err := c.call(ctx, http.MethodPost, "/drift", r, &out)
	return out, err
}

// IsNotFound reports whether err is a 404 from the control API.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// Latency returns the latency model.
func (c *Client) Latency(ctx context.Context) (LatencyModel, error) {
	var m LatencyModel
	err := c.call(ctx, http.MethodGet, "/latency", nil, &m)
	return m, err
}
