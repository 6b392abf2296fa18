package network

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// clock is a manually advanced time source for LRO tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestPagingWithSmallPages(t *testing.T) {
	v := newEnv(t, arm.Config{PageSize: 2})
	v.mustRG(testRG)
	v.mustRG("rg2")
	for i := 0; i < 5; i++ {
		rg := testRG
		if i == 4 {
			rg = "rg2"
		}
		p, err := v.net.NewPublicIPAddressesClient().BeginCreateOrUpdate(v.ctx, rg, fmt.Sprintf("pip%d", i), armnetwork.PublicIPAddress{Location: ptr(testLoc), SKU: stdSKU()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
			t.Fatal(err)
		}
	}
	count := func(pager interface {
		More() bool
	}, next func() (int, string, error)) (int, int) {
		n, pages := 0, 0
		for pager.More() {
			k, link, err := next()
			if err != nil {
				t.Fatal(err)
			}
			if link != "" && !strings.HasPrefix(link, v.srv.URL) {
				t.Fatalf("nextLink not absolute: %s", link)
			}
			n += k
			pages++
		}
		return n, pages
	}
	rgPager := v.net.NewPublicIPAddressesClient().NewListPager(testRG, nil)
	n, pages := count(rgPager, func() (int, string, error) {
		p, err := rgPager.NextPage(v.ctx)
		link := ""
		if p.NextLink != nil {
			link = *p.NextLink
		}
		return len(p.Value), link, err
	})
	if n != 4 || pages != 2 {
		t.Fatalf("rg list: %d items in %d pages", n, pages)
	}
	allPager := v.net.NewPublicIPAddressesClient().NewListAllPager(nil)
	n, pages = count(allPager, func() (int, string, error) {
		p, err := allPager.NextPage(v.ctx)
		return len(p.Value), "", err
	})
	if n != 5 || pages != 3 {
		t.Fatalf("subscription list: %d items in %d pages", n, pages)
	}
	// Child collection paging: NSG rules.
	rules := []*armnetwork.SecurityRule{}
	for i := 0; i < 3; i++ {
		rules = append(rules, &armnetwork.SecurityRule{Name: ptr(fmt.Sprintf("r%d", i)), Properties: &armnetwork.SecurityRulePropertiesFormat{
			Protocol: ptr(armnetwork.SecurityRuleProtocolTCP), Access: ptr(armnetwork.SecurityRuleAccessAllow), Direction: ptr(armnetwork.SecurityRuleDirectionInbound),
			Priority: ptr(int32(100 + i)), SourceAddressPrefix: ptr("*"), DestinationAddressPrefix: ptr("*"), SourcePortRange: ptr("*"), DestinationPortRange: ptr("80")}})
	}
	np, err := v.net.NewSecurityGroupsClient().BeginCreateOrUpdate(v.ctx, testRG, "nsg", armnetwork.SecurityGroup{Location: ptr(testLoc),
		Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: rules}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nsg, err := np.PollUntilDone(v.ctx, fastPoll)
	if err != nil {
		t.Fatal(err)
	}
	if len(nsg.Properties.DefaultSecurityRules) != 6 || *nsg.Properties.DefaultSecurityRules[0].Name != "AllowVnetInBound" {
		t.Fatal("default rules missing")
	}
	rp := v.net.NewSecurityRulesClient().NewListPager(testRG, "nsg", nil)
	n, pages = count(rp, func() (int, string, error) {
		p, err := rp.NextPage(v.ctx)
		return len(p.Value), "", err
	})
	if n != 3 || pages != 2 {
		t.Fatalf("rules: %d items in %d pages", n, pages)
	}
	// Same priority and direction conflicts.
	dup := *rules[0]
	dup.Name = ptr("dup")
	_, err = v.net.NewSecurityRulesClient().BeginCreateOrUpdate(v.ctx, testRG, "nsg", "dup", dup, nil)
	if re := respErr(t, err); re.ErrorCode != "SecurityRuleConflict" {
		t.Fatalf("got %s", re.ErrorCode)
	}
}

func TestLROWithDurationAndFailure(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	v := newEnv(t, arm.Config{LRODuration: 10 * time.Second, Now: clk.Now})
	v.mustRG(testRG)
	rts := v.net.NewRouteTablesClient()
	poller, err := rts.BeginCreateOrUpdate(v.ctx, testRG, "rt", armnetwork.RouteTable{Location: ptr(testLoc), Properties: &armnetwork.RouteTablePropertiesFormat{
		Routes: []*armnetwork.Route{{Name: ptr("node0____10.244.0.0_24"), Properties: &armnetwork.RoutePropertiesFormat{AddressPrefix: ptr("10.244.0.0/24"),
			NextHopType: ptr(armnetwork.RouteNextHopTypeVirtualAppliance), NextHopIPAddress: ptr("10.0.1.4")}}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rts.Get(v.ctx, testRG, "rt", nil)
	if err != nil || *got.Properties.ProvisioningState != armnetwork.ProvisioningStateUpdating || *got.Properties.Routes[0].Properties.ProvisioningState != armnetwork.ProvisioningStateUpdating {
		t.Fatalf("during LRO: %v %v", err, got.Properties.ProvisioningState)
	}
	if _, err := poller.Poll(v.ctx); err != nil || poller.Done() {
		t.Fatalf("poll before due: done=%v err=%v", poller.Done(), err)
	}
	clk.Add(11 * time.Second)
	res, err := poller.PollUntilDone(v.ctx, fastPoll)
	if err != nil || *res.Properties.ProvisioningState != armnetwork.ProvisioningStateSucceeded {
		t.Fatalf("after LRO: %v", err)
	}
	// Delete is an LRO too: the resource shows Deleting until it is gone.
	dp, err := rts.BeginDelete(v.ctx, testRG, "rt", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rts.Get(v.ctx, testRG, "rt", nil); err != nil || *got.Properties.ProvisioningState != armnetwork.ProvisioningStateDeleting {
		t.Fatalf("during delete: %v", err)
	}
	clk.Add(11 * time.Second)
	if _, err := dp.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
	if _, err := rts.Get(v.ctx, testRG, "rt", nil); respErr(t, err).StatusCode != 404 {
		t.Fatal("not deleted")
	}
	// Scripted failure: the poller reports the error code, the resource says Failed.
	v.engine.FailNextLRO(func(i arm.LROInfo) bool { return i.Method == "PUT" && strings.HasSuffix(i.Type, "/routeTables") },
		&arm.Error{Code: "InternalServerError", Message: "injected"})
	fp, err := rts.BeginCreateOrUpdate(v.ctx, testRG, "rt2", armnetwork.RouteTable{Location: ptr(testLoc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(11 * time.Second)
	_, err = fp.PollUntilDone(v.ctx, fastPoll)
	if re := respErr(t, err); re.ErrorCode != "InternalServerError" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	if got, _ := rts.Get(v.ctx, testRG, "rt2", nil); *got.Properties.ProvisioningState != armnetwork.ProvisioningStateFailed {
		t.Fatal("resource not Failed")
	}
}

func TestFailedLROWithZeroDuration(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	v.engine.FailNextLRO(nil, &arm.Error{Code: "Conflict", Message: "injected"})
	p, err := v.net.NewRouteTablesClient().BeginCreateOrUpdate(v.ctx, testRG, "rt", armnetwork.RouteTable{Location: ptr(testLoc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.PollUntilDone(v.ctx, fastPoll)
	if re := respErr(t, err); re.ErrorCode != "Conflict" {
		t.Fatalf("got %s", re.ErrorCode)
	}
	// The rule was consumed: the next write succeeds.
	p, err = v.net.NewRouteTablesClient().BeginCreateOrUpdate(v.ctx, testRG, "rt", armnetwork.RouteTable{Location: ptr(testLoc)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PollUntilDone(v.ctx, fastPoll); err != nil {
		t.Fatal(err)
	}
}
