package writers

import (
	"testing"
	"time"

	"github.com/azure-ccm/azure-ccm/internal/config"
)

func TestOptionsForCacheTTLs(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  config.Config
		want Options
	}{
		{"defaults", config.Config{}, Options{}},
		{"each key its model", config.Config{LoadBalancerCacheTTLInSeconds: 10, RouteTableCacheTTLInSeconds: 20, NsgCacheTTLInSeconds: 30},
			Options{CacheTTL: 10 * time.Second, RouteTableCacheTTL: 20 * time.Second, SecurityGroupCacheTTL: 30 * time.Second}},
		{"cache off", config.Config{NsgCacheTTLInSeconds: 30, DisableAPICallCache: true},
			Options{CacheTTL: -1, RouteTableCacheTTL: -1, SecurityGroupCacheTTL: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := OptionsFor(&c.cfg)
			if got.CacheTTL != c.want.CacheTTL || got.RouteTableCacheTTL != c.want.RouteTableCacheTTL || got.SecurityGroupCacheTTL != c.want.SecurityGroupCacheTTL {
				t.Errorf("OptionsFor = %+v, want %+v", got, c.want)
			}
		})
	}
}
