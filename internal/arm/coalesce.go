package arm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// coalescePolicy is a per-call policy: identical GETs (same URL) that are in flight at the same
// time are sent once; every caller gets its own copy of the response. Only GETs are coalesced:
// they have no side effects, and an answer that arrives after a caller asked is as fresh as
// one it would have fetched itself.
type coalescePolicy struct {
	metrics *Metrics

	mu       sync.Mutex
	inflight map[string]*flight
	// joined counts callers that were answered by another caller's request (tests, metrics).
	joined atomic.Int64
}

type flight struct {
	done chan struct{}
	resp *sharedResponse
	err  error
}

type sharedResponse struct {
	status     int
	statusText string
	proto      string
	header     http.Header
	body       []byte
}

func (p *coalescePolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	if raw.Method != http.MethodGet {
		return req.Next()
	}
	key := raw.URL.String()
	p.mu.Lock()
	if p.inflight == nil {
		p.inflight = map[string]*flight{}
	}
	if f, ok := p.inflight[key]; ok {
		p.joined.Add(1)
		p.mu.Unlock()
		if p.metrics != nil {
			p.metrics.Coalesced.WithLabelValues(ParseOperation(raw.Method, raw.URL.Path).ResourceType).Inc()
		}
		select {
		case <-f.done:
		case <-raw.Context().Done():
			return nil, raw.Context().Err()
		}
		if f.err != nil {
			// The leader's context ended, not ours: send our own request rather than fail.
			if (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)) && raw.Context().Err() == nil {
				return req.Next()
			}
			return nil, f.err
		}
		return f.resp.toResponse(raw), nil
	}
	f := &flight{done: make(chan struct{})}
	p.inflight[key] = f
	p.mu.Unlock()

	resp, err := req.Next()
	if err == nil {
		var body []byte
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			f.resp = &sharedResponse{status: resp.StatusCode, statusText: resp.Status, proto: resp.Proto,
				header: resp.Header.Clone(), body: body}
		}
	}
	f.err = err
	p.mu.Lock()
	delete(p.inflight, key)
	p.mu.Unlock()
	close(f.done)
	if err != nil {
		return nil, err
	}
	return f.resp.toResponse(raw), nil
}

func (s *sharedResponse) toResponse(req *http.Request) *http.Response {
	return &http.Response{
		Status: s.statusText, StatusCode: s.status, Proto: s.proto, Header: s.header.Clone(),
		Body: io.NopCloser(bytes.NewReader(s.body)), ContentLength: int64(len(s.body)), Request: req,
	}
}
