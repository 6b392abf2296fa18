package disks

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/compute/armcompute/v7"

	"github.com/azure-ccm/azure-ccm/internal/arm"
)

// Tags written on disks the provisioner creates, as the in-tree provisioner named them.
const (
	TagCreatedForPVCNamespace = "kubernetes.io-created-for-pvc-namespace"
	TagCreatedForPVCName      = "kubernetes.io-created-for-pvc-name"
	TagCreatedForPVName       = "kubernetes.io-created-for-pv-name"
)

// Client does the ARM calls on managed disks of one subscription.
type Client struct {
	Disks          *armcompute.DisksClient
	SubscriptionID string
	PollFrequency  time.Duration
}

// NewClient uses the compute client factory of the ARM layer (azure.json subscription).
func NewClient(c *arm.Clients) *Client {
	return &Client{Disks: c.Compute.NewDisksClient(), SubscriptionID: c.Config.SubscriptionID, PollFrequency: c.PollFrequency}
}

func (c *Client) check(id DiskID) error {
	if id.SubscriptionID != "" && !strings.EqualFold(id.SubscriptionID, c.SubscriptionID) {
		return fmt.Errorf("disk %s is in subscription %s; only subscription %s (azure.json) is supported", id.Name, id.SubscriptionID, c.SubscriptionID)
	}
	return nil
}

// Get reads a disk. A missing disk is (nil, nil).
func (c *Client) Get(ctx context.Context, id DiskID) (*armcompute.Disk, error) {
	if err := c.check(id); err != nil {
		return nil, err
	}
	resp, err := c.Disks.Get(ctx, id.ResourceGroup, id.Name, nil)
	if arm.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading disk %s: %w", id, err)
	}
	return &resp.Disk, nil
}

// Spec is a new empty managed disk.
type Spec struct {
	ID       DiskID
	Location string
	ARMZone  string // "" = non-zonal
	SKU      string
	SizeGiB  int32
	Tags     map[string]string
}

// Create creates an empty disk and waits for it.
func (c *Client) Create(ctx context.Context, s Spec) (*armcompute.Disk, error) {
	if err := c.check(s.ID); err != nil {
		return nil, err
	}
	d := armcompute.Disk{
		Location: to.Ptr(s.Location),
		SKU:      &armcompute.DiskSKU{Name: to.Ptr(armcompute.DiskStorageAccountTypes(s.SKU))},
		Properties: &armcompute.DiskProperties{
			CreationData: &armcompute.CreationData{CreateOption: to.Ptr(armcompute.DiskCreateOptionEmpty)},
			DiskSizeGB:   to.Ptr(s.SizeGiB),
		},
		Tags: map[string]*string{},
	}
	if s.ARMZone != "" {
		d.Zones = []*string{to.Ptr(s.ARMZone)}
	}
	for k, v := range s.Tags {
		d.Tags[k] = to.Ptr(v)
	}
	p, err := c.Disks.BeginCreateOrUpdate(ctx, s.ID.ResourceGroup, s.ID.Name, d, nil)
	if err != nil {
		return nil, fmt.Errorf("creating disk %s: %w", s.ID, err)
	}
	resp, err := p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: c.PollFrequency})
	if err != nil {
		return nil, fmt.Errorf("creating disk %s: %w", s.ID, err)
	}
	return &resp.Disk, nil
}

// Delete deletes a disk and waits; a missing disk is success. ARM refuses to delete an attached
// disk (409 OperationNotAllowed); the error says so and the caller retries later.
func (c *Client) Delete(ctx context.Context, id DiskID) error {
	if err := c.check(id); err != nil {
		return err
	}
	p, err := c.Disks.BeginDelete(ctx, id.ResourceGroup, id.Name, nil)
	if err == nil {
		_, err = p.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: c.PollFrequency})
	}
	switch {
	case err == nil || arm.IsNotFound(err):
		return nil
	case arm.StatusCode(err) == http.StatusConflict:
		// OperationNotAllowed is ARM's answer for an attached disk; other conflicts (a
		// concurrent operation) heal by retrying too.
		return fmt.Errorf("disk %s: deletion refused, the disk is still attached or busy (retrying): %w", id, err)
	}
	return fmt.Errorf("deleting disk %s: %w", id, err)
}

// ZonesOf returns a disk's ARM zones.
func ZonesOf(d *armcompute.Disk) []string {
	var out []string
	for _, z := range d.Zones {
		if z != nil {
			out = append(out, *z)
		}
	}
	return out
}
