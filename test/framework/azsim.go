package framework

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/azure-ccm/azure-ccm/internal/azsim/server"
	"github.com/azure-ccm/azure-ccm/internal/azsim/topology"
)

// azsimCloudName is the cloud name azsim's metadata document serves; azure.json's `cloud`
// must name it for the CCM to pick azsim's endpoints.
const azsimCloudName = "AzureCloud"

// startAzure starts azsim in-process with its files under dir/azsim and seeds topo; ctx bounds
// the start-up only (azsim runs until Close).
func startAzure(ctx context.Context, dir string, topo *topology.Topology, logf func(string, ...any)) (*Azure, *topology.Result, error) {
	srv, err := server.Start(context.WithoutCancel(ctx), server.Options{
		Dir:       filepath.Join(dir, "azsim"),
		CloudName: azsimCloudName,
		Logf:      logf,
	})
	if err != nil {
		return nil, nil, err
	}
	norm, err := topo.Normalize()
	if err != nil {
		_ = srv.Close()
		return nil, nil, fmt.Errorf("topology: %w", err)
	}
	res, err := srv.Seed(ctx, norm)
	if err != nil {
		_ = srv.Close()
		return nil, nil, fmt.Errorf("seed azsim: %w", err)
	}
	creds := srv.Credentials()
	a := &Azure{
		Server:   srv,
		Control:  srv.Client(),
		URL:      srv.URL(),
		IMDSURL:  srv.IMDSURL(),
		CAFile:   srv.CAFile(),
		Cloud:    azsimCloudName,
		TenantID: creds.TenantID,
		close:    func() { _ = srv.Close() },
	}
	if len(creds.Clients) > 0 {
		a.ClientID, a.ClientSecret = creds.Clients[0].ClientID, creds.Clients[0].Secret
	}
	azureDefaults(a, norm)
	return a, res, nil
}
