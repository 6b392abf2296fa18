package network

import (
	"errors"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/network/armnetwork/v9"

	"github.com/azure-ccm/azure-ccm/internal/azsim/arm"
)

// Public addresses come from documentation ranges: IPv4 203.0.113.0/24, then 198.51.100.0/24,
// 192.0.2.0/24 and, for scale runs beyond those 762 addresses, the benchmarking range
// 198.18.0.0/15; IPv6 2001:db8::/32. Prefixes are carved from the same spaces.
var (
	publicV4Ranges = []arm.IPRange{mustRange("203.0.113.0/24", 1, 1), mustRange("198.51.100.0/24", 1, 1),
		mustRange("192.0.2.0/24", 1, 1), mustRange("198.18.0.0/15", 1, 1)}
	publicV6Ranges = []arm.IPRange{mustRange("2001:db8::/32", 1, 0)}
)

const (
	spacePublicV4 = "public-v4"
	spacePublicV6 = "public-v6"
)

func mustRange(cidr string, lo, hi int) arm.IPRange {
	r, err := arm.ParseRange(cidr, lo, hi)
	if err != nil {
		panic(err)
	}
	return r
}

// dnsLabelPattern is the rule NRP states in its InvalidDomainNameLabel answers (lower case only:
// a label with capitals is refused, not folded).
var dnsLabelPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{1,61}[a-z0-9]$`)

func isV6(doc map[string]any) bool {
	return strings.EqualFold(arm.Str(doc, "properties", "publicIPAddressVersion"), "IPv6")
}

func publicSpace(v6 bool) (string, []arm.IPRange) {
	if v6 {
		return spacePublicV6, publicV6Ranges
	}
	return spacePublicV4, publicV4Ranges
}

func skuName(doc map[string]any) string { return arm.Str(doc, "sku", "name") }

func preparePublicIP(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.PublicIPAddress{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	if err := checkExtendedLocation(w); err != nil {
		return err
	}
	d := w.Doc
	p := arm.Props(d)
	sku := arm.Obj(d, true, "sku")
	switch name := arm.Str(sku, "name"); {
	case name == "":
		sku["name"] = "Basic"
	case strings.EqualFold(name, "Basic"), strings.EqualFold(name, "Standard"), strings.EqualFold(name, "StandardV2"):
	default:
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid public IP SKU '%s'.", name)
	}
	if arm.Str(sku, "tier") == "" {
		sku["tier"] = "Regional"
	}
	basic := strings.EqualFold(arm.Str(sku, "name"), "Basic")
	if arm.Str(p, "publicIPAddressVersion") == "" {
		p["publicIPAddressVersion"] = "IPv4"
	}
	if v := arm.Str(p, "publicIPAddressVersion"); !oneOf(v, []string{"IPv4", "IPv6"}) {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid publicIPAddressVersion '%s'; allowed values are IPv4, IPv6.", v)
	}
	if m := arm.Str(p, "publicIPAllocationMethod"); m != "" && !oneOf(m, []string{"Static", "Dynamic"}) {
		return arm.BadRequest("InvalidRequestFormat", "Cannot parse the request: invalid publicIPAllocationMethod '%s'; allowed values are Static, Dynamic.", m)
	}
	switch m := arm.Str(p, "publicIPAllocationMethod"); {
	case m == "" && basic:
		p["publicIPAllocationMethod"] = "Dynamic"
	case m == "":
		p["publicIPAllocationMethod"] = "Static"
	case !basic && strings.EqualFold(m, "Dynamic"):
		return arm.BadRequest("StandardSkuPublicIPAddressesMustBeStatic",
			"Standard sku publicIp %s must have AllocationMethod set to Static.", w.ID)
	}
	if _, ok := p["idleTimeoutInMinutes"]; !ok {
		p["idleTimeoutInMinutes"] = 4
	}
	if n, ok := numberOf(p["idleTimeoutInMinutes"]); ok && (n < 4 || n > 30) {
		return arm.BadRequest("PublicIPIdleTimeoutIsOutOfRange", "The idle timeout of public IP %s must be between 4 and 30 minutes.", w.ID)
	}
	if _, ok := p["ipTags"]; !ok {
		p["ipTags"] = []any{}
	}
	if !basic {
		if _, ok := p["ddosSettings"]; !ok {
			p["ddosSettings"] = map[string]any{"protectionMode": "VirtualNetworkInherited"}
		}
	}
	if w.Old != nil {
		if skuName(w.Old) != "" && !strings.EqualFold(skuName(w.Old), arm.Str(sku, "name")) && arm.Str(w.Old, "properties", "ipConfiguration", "id") != "" {
			return arm.BadRequest("PublicIPSkuCannotBeChangedWhenAssociated", "Public IP %s SKU cannot be changed while it is associated with %s.", w.ID, arm.Str(w.Old, "properties", "ipConfiguration", "id"))
		}
		if err := checkSKUChange(w.ID.String(), w.Old, arm.Str(sku, "name")); err != nil {
			return err
		}
		if !sameStrings(stringsAt(w.Old, "zones"), stringsAt(d, "zones")) {
			return arm.BadRequest("ResourceAvailabilityZonesCannotBeModified", "Resource %s has an existing availability zone constraint %v and the request has availability zone constraint %v, which do not match. Zones cannot be added/updated/removed once the resource is created.", w.ID, stringsAt(w.Old, "zones"), stringsAt(d, "zones"))
		}
		if isV6(w.Old) != isV6(d) {
			return arm.BadRequest("PublicIPAddressVersionCannotBeChanged", "The IP version of public IP %s cannot be changed.", w.ID)
		}
		if t := changedIPTagTypes(w.Old, d); len(t) > 0 {
			return arm.BadRequest("PublicIPIpTagsCannotBeChanged",
				"The IP tags of type %s of public IP %s cannot be changed after it is created; only FirstPartyUsage IP tags can.", strings.Join(t, ", "), w.ID)
		}
	}
	// DNS label: fqdn = label.location.cloudapp.azure.com, unique per location.
	if dns := arm.Obj(p, false, "dnsSettings"); dns != nil {
		label := arm.Str(dns, "domainNameLabel")
		if label == "" {
			delete(dns, "fqdn")
		} else {
			if !dnsLabelPattern.MatchString(label) {
				return arm.BadRequest("InvalidDomainNameLabel",
					"Domain name label %s of public IP %s is not valid: a label must match %s.", label, w.ID, dnsLabelPattern)
			}
			loc := strings.ToLower(strings.ReplaceAll(arm.Str(d, "location"), " ", ""))
			fqdn := label + "." + loc + ".cloudapp.azure.com"
			for _, other := range tx.List(ns+"publicIPAddresses", "") {
				if !arm.SameID(arm.Str(other, "id"), w.ID.String()) && strings.EqualFold(arm.Str(other, "properties", "dnsSettings", "fqdn"), fqdn) {
					return arm.BadRequest("DnsRecordInUse", "DNS record %s is already used by another public IP.", fqdn)
				}
			}
			dns["fqdn"] = fqdn
		}
	}
	carry(w, "ipConfiguration", "natGateway")
	owner := w.ID.String()
	space, ranges := publicSpace(isV6(d))
	if prefixID := refID(p, "publicIPPrefix"); prefixID != "" {
		prefix, ok := tx.Get(prefixID)
		if !ok {
			return arm.InvalidReference(prefixID, owner)
		}
		if basic {
			return arm.BadRequest("PublicIPPrefixSkuMismatch", "Public IP %s with SKU Basic cannot be allocated from public IP prefix %s with SKU Standard.", w.ID, prefixID)
		}
		r, err := arm.ParseRange(arm.Str(prefix, "properties", "ipPrefix"), 0, 0)
		if err != nil {
			return arm.BadRequest("PublicIPPrefixNotProvisioned", "Public IP prefix %s has no address range yet.", prefixID)
		}
		space, ranges = prefixSpace(prefixID), []arm.IPRange{r}
	}
	if strings.EqualFold(arm.Str(p, "publicIPAllocationMethod"), "Static") {
		// Release what the owner held in another space (prefix or version change).
		for _, sp := range []string{spacePublicV4, spacePublicV6} {
			if sp != space {
				tx.ReleaseIP(sp, owner)
			}
		}
		ip, err := tx.ReserveIP(space, ranges, owner, "")
		if err != nil {
			if ae := (*arm.Error)(nil); errors.As(err, &ae) && ae.Code == "SubnetIsFull" {
				ae.Code, ae.Message = "PublicIPCountLimitReached", "Cannot create more public IP addresses: the address pool is exhausted."
			}
			return err
		}
		p["ipAddress"] = ip
	} else {
		// Dynamic: the deriver assigns an address while the IP is associated.
		delete(p, "ipAddress")
		if w.Old != nil {
			if ip := arm.Str(w.Old, "properties", "ipAddress"); ip != "" {
				p["ipAddress"] = ip
			}
		}
	}
	return nil
}

func beforeDeletePublicIP(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	for _, k := range []string{"ipConfiguration", "natGateway"} {
		if by := arm.Str(doc, "properties", k, "id"); by != "" {
			return arm.BadRequest("PublicIPAddressInUse",
				"Public IP address %s can not be deleted since it is still allocated to resource %s. In order to delete the public IP, disassociate/detach the Public IP address from the resource. To learn how to do this, see aka.ms/deletepublicip.", id, by)
		}
	}
	return nil
}

func prefixSpace(prefixID string) string { return "prefix:" + arm.KeyOf(prefixID) }

func preparePublicIPPrefix(tx *arm.Tx, w *arm.Write) error {
	if err := normalize(w, &armnetwork.PublicIPPrefix{}); err != nil {
		return err
	}
	keepResourceGUID(w)
	d, p := w.Doc, arm.Props(w.Doc)
	sku := arm.Obj(d, true, "sku")
	if arm.Str(sku, "name") == "" {
		sku["name"] = "Standard"
	}
	if arm.Str(sku, "tier") == "" {
		sku["tier"] = "Regional"
	}
	if arm.Str(p, "publicIPAddressVersion") == "" {
		p["publicIPAddressVersion"] = "IPv4"
	}
	if _, ok := p["ipTags"]; !ok {
		p["ipTags"] = []any{}
	}
	v6 := isV6(d)
	n, ok := numberOf(p["prefixLength"])
	minLen, maxLen := 24.0, 31.0
	if v6 {
		minLen, maxLen = 120, 127
	}
	if !ok || n < minLen || n > maxLen {
		return arm.BadRequest("InvalidPublicIpPrefixLength", "Public IP prefix %s has an invalid prefix length %v; allowed %v-%v.", w.ID, p["prefixLength"], minLen, maxLen)
	}
	carry(w, "publicIPAddresses")
	if w.Old != nil {
		if old := arm.Str(w.Old, "properties", "ipPrefix"); old != "" {
			op, _ := netip.ParsePrefix(old)
			if float64(op.Bits()) != n || isV6(w.Old) != v6 {
				return arm.BadRequest("PublicIpPrefixCannotBeModified", "The prefix length and IP version of public IP prefix %s cannot be changed.", w.ID)
			}
			p["ipPrefix"] = old
			return nil
		}
	}
	space, ranges := publicSpace(v6)
	block, err := reserveBlock(tx, space, ranges, w.ID.String(), int(n))
	if err != nil {
		return err
	}
	p["ipPrefix"] = block
	return nil
}

// reserveBlock reserves an aligned block of 2^(bits-len) addresses for owner.
func reserveBlock(tx *arm.Tx, space string, ranges []arm.IPRange, owner string, length int) (string, error) {
	for _, r := range ranges {
		if length < r.Prefix.Bits() {
			continue
		}
		size := 1 << (r.Prefix.Addr().BitLen() - length)
		if size > 1<<16 {
			continue
		}
		start := r.Prefix.Masked().Addr()
		for blk := 0; blk < 1<<12; blk++ {
			b := netip.PrefixFrom(start, length)
			if !r.Prefix.Contains(start) {
				break
			}
			a, free := start, true
			for i := 0; i < size; i++ {
				if _, taken := tx.IPOwner(space, a.String()); taken || (blk == 0 && i < r.SkipLow) {
					free = false
					break
				}
				a = a.Next()
			}
			if free {
				a = start
				for i := 0; i < size; i++ {
					if err := tx.Reserve(space, a.String(), owner); err != nil {
						return "", err
					}
					a = a.Next()
				}
				return b.String(), nil
			}
			for i := 0; i < size; i++ {
				start = start.Next()
			}
		}
	}
	return "", arm.BadRequest("PublicIpPrefixLimitReached", "No address block of length /%d is available.", length)
}

func beforeDeletePublicIPPrefix(tx *arm.Tx, id arm.ResourceID, doc map[string]any) error {
	var by []string
	for _, pip := range tx.List(ns+"publicIPAddresses", "") {
		if arm.SameID(refID(arm.Props(pip), "publicIPPrefix"), id.String()) {
			by = append(by, arm.Str(pip, "id"))
		}
	}
	if len(by) > 0 {
		return inUse("PublicIpPrefixInUse", "Public IP prefix", id.String(), by)
	}
	return nil
}

func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !strings.EqualFold(a[i], b[i]) {
			return false
		}
	}
	return true
}

// checkSKUChange applies ARM's in-place public IP upgrade rules (documented for the Basic
// retirement): only Basic → Standard is allowed, never a downgrade, and a Basic IP must be
// Static before its upgrade (a Dynamic one has no address of its own to keep). The error codes
// of the last two rules are azsim's: the reference material names no code for them.
func checkSKUChange(id string, old map[string]any, to string) error {
	from := skuName(old)
	if from == "" {
		from = "Basic"
	}
	if strings.EqualFold(from, to) {
		return nil
	}
	if !strings.EqualFold(from, "Basic") {
		return arm.BadRequest("PublicIPSkuDowngradeNotAllowed", "Public IP %s cannot be changed from SKU %s to %s.", id, from, to)
	}
	if !strings.EqualFold(arm.Str(old, "properties", "publicIPAllocationMethod"), "Static") {
		return arm.BadRequest("PublicIPSkuUpgradeRequiresStaticAllocation",
			"Public IP %s must use Static allocation before its SKU can be upgraded from Basic to %s.", id, to)
	}
	return nil
}

// changedIPTagTypes lists the IP tag types other than FirstPartyUsage whose tags differ between
// two versions of a public IP: ARM changes only FirstPartyUsage tags of an existing public IP
// (the error code for the others is azsim's; the reference material names none).
func changedIPTagTypes(old, doc map[string]any) []string {
	shown := map[string]string{}
	byType := func(d map[string]any) map[string][]string {
		out := map[string][]string{}
		for _, t := range arm.Arr(arm.Props(d), "ipTags") {
			typ := arm.Str(t, "ipTagType")
			shown[strings.ToLower(typ)] = typ
			out[strings.ToLower(typ)] = append(out[strings.ToLower(typ)], arm.Str(t, "tag"))
		}
		for _, v := range out {
			sort.Strings(v)
		}
		return out
	}
	a, b := byType(old), byType(doc)
	var out []string
	for _, m := range []map[string][]string{a, b} {
		for typ := range m {
			if typ == "firstpartyusage" || slices.Contains(out, typ) || slices.Equal(a[typ], b[typ]) {
				continue
			}
			out = append(out, typ)
		}
	}
	sort.Strings(out)
	for i, t := range out {
		out[i] = shown[t]
	}
	return out
}
