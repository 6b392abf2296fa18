package plan

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/annotations"
	"github.com/azure-ccm/azure-ccm/internal/loadbalancer/naming"
	"github.com/azure-ccm/azure-ccm/internal/tags"
)

// maxTagValue is ARM's limit on a tag value.
const maxTagValue = 256

// ownershipTag: the provider's own tags on a managed public IP are never removed by the tag
// policy.
func ownershipTag(k string) bool {
	for _, o := range []string{naming.TagService, naming.TagClusterName, naming.TagDNSLabelService, naming.TagPIPTagKeys,
		naming.LegacyTagService, naming.LegacyTagClusterName, naming.LegacyTagDNSLabelService} {
		if strings.EqualFold(o, k) {
			return true
		}
	}
	return false
}

// tagPIP reconciles a managed public IP's tags with the configuration (tags, tagsMap,
// systemTags) and the service's azure-pip-tags, which win over the configuration. A key a
// former azure-pip-tags value set and the current one no longer names is removed, unless other
// services share the public IP (they may set keys of their own): the keys the annotation set
// are recorded in the k8s-azure-pip-tag-keys tag.
func tagPIP(c *Cluster, s *Service, p *armnetwork.PublicIPAddress) {
	ann := s.Opts.PIPTags
	want := make(map[string]string, len(c.TagPolicy.Config)+len(ann))
	for k, v := range c.TagPolicy.Config {
		want[k] = v
	}
	for k, v := range ann {
		for old := range want {
			if strings.EqualFold(old, k) {
				delete(want, old)
			}
		}
		want[k] = v
	}
	prev := recordedPIPTagKeys(p.Tags)
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	if len(PIPServices(p)) <= 1 {
		var gone []string
		for _, k := range prev {
			if !slices.ContainsFunc(keys, func(a string) bool { return strings.EqualFold(a, k) }) {
				gone = append(gone, k)
			}
		}
		c.TagPolicy.Remove(p.Tags, gone, ownershipTag)
	} else {
		for _, k := range prev {
			if !slices.ContainsFunc(keys, func(a string) bool { return strings.EqualFold(a, k) }) {
				keys = append(keys, k)
			}
		}
	}
	recordPIPTagKeys(p, keys)
	p.Tags, _ = tags.Reconcile(p.Tags, want, c.TagPolicy.System, ownershipTag)
}

// recordedPIPTagKeys are the keys of the k8s-azure-pip-tag-keys tag.
func recordedPIPTagKeys(t map[string]*string) []string {
	for k, v := range t {
		if strings.EqualFold(k, naming.TagPIPTagKeys) && v != nil {
			return list(*v)
		}
	}
	return nil
}

// recordPIPTagKeys writes the k8s-azure-pip-tag-keys tag (sorted; as many keys as fit in a tag
// value), or removes it when there is none.
func recordPIPTagKeys(p *armnetwork.PublicIPAddress, keys []string) {
	sort.Strings(keys)
	v := ""
	for _, k := range keys {
		next := k
		if v != "" {
			next = v + "," + k
		}
		if len(next) > maxTagValue {
			break
		}
		v = next
	}
	if v == "" {
		deleteTag(p.Tags, naming.TagPIPTagKeys)
		return
	}
	setTag(p.Tags, naming.TagPIPTagKeys, naming.TagPIPTagKeys, v)
}

func list(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// IPTagAction is what happens to a managed public IP whose IP tags differ from azure-pip-ip-tags.
type IPTagAction int

// IP tag actions.
const (
	// IPTagsKeep: nothing to change (the annotation is absent or already satisfied).
	IPTagsKeep IPTagAction = iota
	// IPTagsUpdate: changed in place (enableIPTagMutationForExistingPublicIP, FirstPartyUsage
	// tags only).
	IPTagsUpdate
	// IPTagsRecreate: the public IP is deleted and created again with the new IP tags, as the
	// existing provider does; the address changes.
	IPTagsRecreate
	// IPTagsRefuse: the change cannot be made; the public IP is left as it is (Reason says why).
	IPTagsRefuse
)

// IPTagDecision is the plan for a public IP's IP tags.
type IPTagDecision struct {
	Action IPTagAction
	Reason string
}

// firstPartyUsage is the only IP tag type ARM changes on an existing public IP.
const firstPartyUsage = "FirstPartyUsage"

// DecideIPTags compares a managed public IP's IP tags with the service's azure-pip-ip-tags.
// Without the annotation IP tags are left alone. ARM changes only FirstPartyUsage tags of an
// existing public IP: with enableIPTagMutationForExistingPublicIP those are changed in place
// and other changes refused; without it the public IP is re-created (new address) when this
// service alone uses it and did not name it.
func DecideIPTags(c *Cluster, s *Service, p *armnetwork.PublicIPAddress) IPTagDecision {
	if !s.Opts.PIPIPTagsSet || p == nil {
		return IPTagDecision{}
	}
	var cur []*armnetwork.IPTag
	if p.Properties != nil {
		cur = p.Properties.IPTags
	}
	changed := ipTagChanges(cur, s.Opts.PIPIPTags)
	if len(changed) == 0 {
		return IPTagDecision{}
	}
	name := str(p.Name)
	if p.Properties != nil && p.Properties.PublicIPPrefix != nil {
		return IPTagDecision{Action: IPTagsRefuse, Reason: fmt.Sprintf(
			"%s: public IP %s comes from a public IP prefix and takes the prefix's IP tags; they are not changed", annotations.PIPIPTags, name)}
	}
	if c.IPTagMutation {
		var blocked []string
		for _, t := range changed {
			if !strings.EqualFold(t, firstPartyUsage) {
				blocked = append(blocked, t)
			}
		}
		if len(blocked) > 0 {
			return IPTagDecision{Action: IPTagsRefuse, Reason: fmt.Sprintf(
				"%s: only FirstPartyUsage IP tags of an existing public IP can be changed in place (enableIPTagMutationForExistingPublicIP); the %s tags of public IP %s are left as they are",
				annotations.PIPIPTags, strings.Join(blocked, ", "), name)}
		}
		return IPTagDecision{Action: IPTagsUpdate}
	}
	if UserChosen(s, p) || len(PIPServices(p)) > 1 {
		return IPTagDecision{Action: IPTagsRefuse, Reason: fmt.Sprintf(
			"%s: the IP tags of public IP %s cannot change in place and it is not re-created (named by the service or shared with other services)",
			annotations.PIPIPTags, name)}
	}
	return IPTagDecision{Action: IPTagsRecreate, Reason: fmt.Sprintf(
		"%s: the IP tags of public IP %s cannot change in place; it is deleted and created again with the new IP tags, so the service's address changes (enableIPTagMutationForExistingPublicIP changes FirstPartyUsage tags in place instead)",
		annotations.PIPIPTags, name)}
}

// ipTagChanges lists the IP tag types whose tags differ between cur and want (sorted).
func ipTagChanges(cur []*armnetwork.IPTag, want []annotations.IPTag) []string {
	have := map[string][]string{}
	for _, t := range cur {
		if t != nil {
			have[str(t.IPTagType)] = append(have[str(t.IPTagType)], str(t.Tag))
		}
	}
	wanted := map[string][]string{}
	for _, t := range want {
		wanted[t.Type] = append(wanted[t.Type], t.Tag)
	}
	types := map[string]bool{}
	for t := range have {
		types[t] = true
	}
	for t := range wanted {
		types[t] = true
	}
	var out []string
	for t := range types {
		a, b := slices.Sorted(slices.Values(have[t])), slices.Sorted(slices.Values(wanted[t]))
		if !slices.Equal(a, b) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// setIPTags writes the annotation's IP tags on p.
func setIPTags(p *armnetwork.PublicIPAddress, want []annotations.IPTag) {
	if p.Properties == nil {
		p.Properties = &armnetwork.PublicIPAddressPropertiesFormat{}
	}
	p.Properties.IPTags = []*armnetwork.IPTag{}
	for _, t := range want {
		p.Properties.IPTags = append(p.Properties.IPTags, &armnetwork.IPTag{IPTagType: to.Ptr(t.Type), Tag: to.Ptr(t.Tag)})
	}
}

// LBOfFrontend is the load balancer ID of the frontend a public IP is attached to ("" when it
// is not attached to a load balancer frontend).
func LBOfFrontend(p *armnetwork.PublicIPAddress) string {
	if p == nil || p.Properties == nil || p.Properties.IPConfiguration == nil {
		return ""
	}
	id := str(p.Properties.IPConfiguration.ID)
	l := strings.ToLower(id)
	if i := strings.Index(l, "/frontendipconfigurations/"); i >= 0 && strings.Contains(l, "/loadbalancers/") {
		return id[:i]
	}
	return ""
}
