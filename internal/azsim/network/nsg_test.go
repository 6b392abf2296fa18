package network

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// A rule's address lists may not repeat a range or hold overlapping ones: NRP refuses the write.
func TestSecurityRuleAddressLists(t *testing.T) {
	v := newEnv(t, arm.Config{})
	v.mustRG(testRG)
	for _, tc := range []struct {
		name     string
		src, dst []string
		code     string // "" = accepted
	}{
		{"distinct ranges", []string{"10.20.0.0/16", "192.168.0.1/32"}, []string{"203.0.113.5", "203.0.113.6"}, ""},
		{"a repeated range", []string{"10.20.0.0/16", "192.168.0.1/32", "192.168.0.1/32"}, []string{"203.0.113.5"}, "SecurityRuleParameterContainsDuplicateValue"},
		{"an address and its host range", []string{"192.168.0.1", "192.168.0.1/32"}, []string{"203.0.113.5"}, "SecurityRuleParameterContainsDuplicateValue"},
		{"a repeated destination", []string{"10.0.0.0/8"}, []string{"203.0.113.5", "203.0.113.5"}, "SecurityRuleParameterContainsDuplicateValue"},
		{"overlapping ranges", []string{"10.20.0.0/16", "10.20.8.0/24"}, []string{"203.0.113.5"}, "OverlappingSubnetsNotPermittedInSecurityRule"},
		{"neighbouring ranges", []string{"10.20.8.0/24", "10.20.9.0/24"}, []string{"203.0.113.5"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := &armnetwork.SecurityRule{Name: to.Ptr("r"), Properties: &armnetwork.SecurityRulePropertiesFormat{
				Protocol: to.Ptr(armnetwork.SecurityRuleProtocolTCP), Access: to.Ptr(armnetwork.SecurityRuleAccessAllow),
				Direction: to.Ptr(armnetwork.SecurityRuleDirectionInbound), Priority: to.Ptr[int32](500),
				SourceAddressPrefixes: to.SliceOfPtrs(tc.src...), DestinationAddressPrefixes: to.SliceOfPtrs(tc.dst...),
				SourcePortRange: to.Ptr("*"), DestinationPortRange: to.Ptr("80")}}
			p, err := v.net.NewSecurityGroupsClient().BeginCreateOrUpdate(v.ctx, testRG, "nsg", armnetwork.SecurityGroup{Location: ptr(testLoc),
				Properties: &armnetwork.SecurityGroupPropertiesFormat{SecurityRules: []*armnetwork.SecurityRule{rule}}}, nil)
			if err == nil {
				_, err = p.PollUntilDone(v.ctx, fastPoll)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if re := respErr(t, err); re.ErrorCode != tc.code || re.StatusCode != 400 {
				t.Fatalf("got %s (%d), want %s", re.ErrorCode, re.StatusCode, tc.code)
			}
		})
	}
}
