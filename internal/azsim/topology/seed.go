package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"
)

// SeedOptions tune Seed.
type SeedOptions struct {
	// Decorate adjusts every request before the engine sees it (e.g. to make its LROs finish
	// at once).
	Decorate func(*http.Request) *http.Request
	// PollInterval is the wait between LRO polls (default 10ms).
	PollInterval time.Duration
}

// Seed builds the topology by sending its plan to the ARM handler in-process (so the engine
// validates everything as for any client), waits for each operation, then reads the machines
// back from the engine.
func Seed(ctx context.Context, h http.Handler, topo *Topology, opts SeedOptions) (*Result, error) {
	t, err := topo.Normalize()
	if err != nil {
		return nil, err
	}
	c := &caller{h: h, opts: opts}
	for _, req := range Plan(t) {
		if err := c.run(ctx, req); err != nil {
			return nil, err
		}
	}
	return Collect(ctx, h, t, opts)
}

// caller sends requests to the handler and waits for their operations.
type caller struct {
	h    http.Handler
	opts SeedOptions
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (c *caller) do(ctx context.Context, method, pathQuery string, body any) (reply, error) {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{}, err
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	r, err := http.NewRequestWithContext(ctx, method, "https://azsim.internal"+pathQuery, rd)
	if err != nil {
		return reply{}, err
	}
	r.Header.Set("Authorization", "Bearer azsim-seed")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "azsim-topology")
	if c.opts.Decorate != nil {
		r = c.opts.Decorate(r)
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, r)
	return reply{rec.Code, rec.Header(), rec.Body.Bytes()}, nil
}

func (c *caller) run(ctx context.Context, req Request) error {
	var body any
	if req.Body != nil {
		body = req.Body // a nil map must not become the JSON "null"
	}
	rep, err := c.do(ctx, req.Method, req.Path+"?api-version="+req.APIVersion, body)
	if err != nil {
		return err
	}
	if rep.status >= 300 {
		return fmt.Errorf("seed: %s %s: %d %s", req.Method, req.Path, rep.status, strings.TrimSpace(string(rep.body)))
	}
	if err := c.wait(ctx, rep); err != nil {
		return fmt.Errorf("seed: %s %s: %w", req.Method, req.Path, err)
	}
	return nil
}

// wait polls an operation's Azure-AsyncOperation (or Location) URL until it ends.
func (c *caller) wait(ctx context.Context, rep reply) error {
	async, loc := rep.header.Get("Azure-AsyncOperation"), rep.header.Get("Location")
	if async == "" && (loc == "" || rep.status != http.StatusAccepted) {
		return nil
	}
	interval := c.opts.PollInterval
	if interval <= 0 {
		interval = 10 * time.Millisecond
	}
	for {
		if async != "" {
			r, err := c.do(ctx, http.MethodGet, pathQuery(async), nil)
			if err != nil {
				return err
			}
			var st struct {
				Status string          `json:"status"`
				Error  json.RawMessage `json:"error"`
			}
			_ = json.Unmarshal(r.body, &st)
			switch {
			case r.status >= 300:
				return fmt.Errorf("polling: %d %s", r.status, r.body)
			case strings.EqualFold(st.Status, "Succeeded"):
				return nil
			case strings.EqualFold(st.Status, "Failed"), strings.EqualFold(st.Status, "Canceled"):
				return fmt.Errorf("operation %s: %s", st.Status, st.Error)
			}
		} else {
			r, err := c.do(ctx, http.MethodGet, pathQuery(loc), nil)
			if err != nil {
				return err
			}
			if r.status >= 300 {
				return fmt.Errorf("operation failed: %d %s", r.status, r.body)
			}
			if r.status != http.StatusAccepted {
				return nil
			}
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func pathQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if u.RawQuery == "" {
		return u.EscapedPath()
	}
	return u.EscapedPath() + "?" + u.RawQuery
}

// getJSON GETs a path and decodes the body into v.
func (c *caller) getJSON(ctx context.Context, pathQuery string, v any) error {
	r, err := c.do(ctx, http.MethodGet, pathQuery, nil)
	if err != nil {
		return err
	}
	if r.status != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", pathQuery, r.status, strings.TrimSpace(string(r.body)))
	}
	return json.Unmarshal(r.body, v)
}

// list GETs a collection, following nextLink, and returns the raw items.
func (c *caller) list(ctx context.Context, pathQuery string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for pathQuery != "" {
		var page struct {
			Value    []json.RawMessage `json:"value"`
			NextLink string            `json:"nextLink"`
		}
		if err := c.getJSON(ctx, pathQuery, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Value...)
		pathQuery = ""
		if page.NextLink != "" {
			pathQuery = nextPath(page.NextLink)
		}
	}
	return out, nil
}

func nextPath(s string) string { return pathQuery(s) }

// Do sends one ARM request to h in-process and waits for its operation, as Seed does for
// each planned request. It is what the control API uses for VM actions.
func Do(ctx context.Context, h http.Handler, method, path, apiVersion string, body map[string]any, opts SeedOptions) error {
	c := &caller{h: h, opts: opts}
	return c.run(ctx, Request{Method: method, Path: path, APIVersion: apiVersion, Body: body})
}
