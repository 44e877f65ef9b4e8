package resources

import (
	"strconv"
	"strings"
)

// String returns the endpoint as one line for logs, status pages and
// fmt.Print: its addresses, its health, and the fields that differ from
// their defaults, e.g.
//
//	10.0.0.1:8080 HEALTHY
//	10.0.0.2:8080,[2001:db8::2]:8080 DRAINING weight=3 hostname="b-2" proxy=10.0.0.9:3128
//
// Metadata is left out: it is arbitrary and can be large.
func (e Endpoint) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(e.Addresses, ","))
	if len(e.Addresses) == 0 {
		b.WriteString("(no address)")
	}
	b.WriteString(" " + e.HealthStatus.String())
	if e.Weight != 1 {
		b.WriteString(" weight=" + strconv.FormatUint(uint64(e.Weight), 10))
	}
	if e.Hostname != "" {
		b.WriteString(" hostname=" + strconv.Quote(e.Hostname))
	}
	if e.ProxyAddress != "" {
		b.WriteString(" proxy=" + e.ProxyAddress)
	}
	return b.String()
}

// String returns the drop category and its share as a percentage, e.g.
// "throttle" 2.5%.
func (d DropOverload) String() string {
	return strconv.Quote(d.Category) + " " + strconv.FormatFloat(float64(d.PerMillion)/10000, 'g', -1, 64) + "%"
}
