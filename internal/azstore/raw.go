package azstore

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	azarm "github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azpolicy "github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"

	"github.com/azure-ccm/azure-ccm/internal/arm"
	"github.com/azure-ccm/azure-ccm/internal/armjson"
)

// NetworkAPIVersion is the api-version of the SDK's load balancer and NSG clients (armnetwork
// v9); the raw client sends the same, so both paths read and write the same documents
// (TestRawClientSpeaksLikeTheSDK checks it against the SDK's own requests).
const NetworkAPIVersion = "2025-05-01"

// RawClient sends the GET and PUT of a resource whose document is large — a load balancer with
// a backend address per node, an NSG with rules per service — through the SDK's pipeline (credentials, retries, the throttling
// gate, metrics, long-running operation polling) but encodes and decodes it with armjson
// instead of the SDK's generated methods, which hold tens of megabytes of maps per document of
// a 5,000-node cluster while they work.
type RawClient struct {
	Pipeline runtime.Pipeline
	// Endpoint is ARM's base URL.
	Endpoint string
	Codec    *armjson.Codec
}

// NewRawClient takes the pipeline and endpoint of an azcore ARM client built with the same
// credential and options as the SDK's clients.
func NewRawClient(c *azarm.Client, codec *armjson.Codec) *RawClient {
	return &RawClient{Pipeline: c.Pipeline(), Endpoint: c.Endpoint(), Codec: codec}
}

func (c *RawClient) request(ctx context.Context, method, id, apiVersion string) (*azpolicy.Request, error) {
	req, err := runtime.NewRequest(ctx, method, runtime.JoinPaths(c.Endpoint, id))
	if err != nil {
		return nil, err
	}
	q := req.Raw().URL.Query()
	q.Set("api-version", apiVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header["Accept"] = []string{"application/json"}
	return req, nil
}

// Get reads resource id into out. found is false on 404.
func (c *RawClient) Get(ctx context.Context, id, apiVersion string, out any) (found bool, err error) {
	req, err := c.request(ctx, http.MethodGet, id, apiVersion)
	if err != nil {
		return false, err
	}
	// The pipeline reads and closes the body before it returns (azcore's body download
	// policy): resp.Body is a buffer.
	resp, err := c.Pipeline.Do(req) //nolint:bodyclose // closed by the pipeline, see above
	if err != nil {
		return false, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		err := runtime.NewResponseError(resp)
		if arm.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return false, err
	}
	return true, c.Codec.Unmarshal(body, out)
}

// Put writes in to resource id (If-Match etag when etag is set, as the context's headers
// carry it), waits for the operation as the SDK's BeginCreateOrUpdate and PollUntilDone do, and
// decodes the final document into out.
func (c *RawClient) Put(ctx context.Context, id, apiVersion, etag string, in, out any, poll *runtime.PollUntilDoneOptions) error {
	body, err := c.Codec.Marshal(in)
	if err != nil {
		return err
	}
	ctx = conditional(ctx, etag)
	req, err := c.request(ctx, http.MethodPut, id, apiVersion)
	if err != nil {
		return err
	}
	if err := req.SetBody(streaming.NopCloser(bytes.NewReader(body)), "application/json"); err != nil {
		return err
	}
	resp, err := c.Pipeline.Do(req) //nolint:bodyclose // closed by the pipeline, as in Get
	if err != nil {
		return err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated) {
		return runtime.NewResponseError(resp)
	}
	// The final document as raw bytes (json.RawMessage keeps a copy), decoded here with the codec.
	poller, err := runtime.NewPoller(resp, c.Pipeline, &runtime.NewPollerOptions[json.RawMessage]{
		FinalStateVia: runtime.FinalStateViaAzureAsyncOp,
	})
	if err != nil {
		return err
	}
	final, err := poller.PollUntilDone(ctx, poll)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(final)) == 0 {
		return nil
	}
	return c.Codec.Unmarshal(final, out)
}
