package xdsdebug

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goxds/xds/client"
	"github.com/goxds/xds/resources"
)

// What the page shows, one type per view. The JSON names are the page's
// JSON format: tools read them, so they change only compatibly.

// overview is the front page.
type overview struct {
	Node        nodeView        `json:"node"`
	Authorities []authorityView `json:"authorities"`
	Types       []typeCount     `json:"types"`
	Trees       []treeSummary   `json:"trees"`
}

type nodeView struct {
	ID       string `json:"id"`
	Cluster  string `json:"cluster,omitempty"`
	Locality string `json:"locality,omitempty"`
}

// authorityView is an authority and its servers (client.AuthorityStatus).
type authorityView struct {
	// Name is "" for the top-level servers.
	Name          string       `json:"name"`
	Current       int          `json:"current"`
	FallbackInUse bool         `json:"fallback_in_use"`
	Servers       []serverView `json:"servers"`
}

type serverView struct {
	URI string `json:"server_uri"`
	// State is "connected", "unreachable", "connecting" (neither answered
	// nor failed yet) or "unused" (a lower-priority server not needed).
	State        string     `json:"state"`
	Current      bool       `json:"current"`
	Since        *time.Time `json:"since,omitempty"`
	Error        string     `json:"error,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	LastErrorAt  *time.Time `json:"last_error_at,omitempty"`
	ControlPlane string     `json:"control_plane,omitempty"`
}

// typeCount counts the resources of one type.
type typeCount struct {
	TypeURL  string         `json:"type_url"`
	Total    int            `json:"total"`
	ByStatus map[string]int `json:"by_status"`
	Errors   int            `json:"errors"`
	FromDisk int            `json:"from_disk"`
}

// resourceRow is one resource of the cache (client.ResourceStatus).
type resourceRow struct {
	TypeURL string `json:"type_url"`
	// Name is the name with the subscription's dynamic parameters, if
	// any: it names the row (view=resource&name=).
	Name         string     `json:"name"`
	Version      string     `json:"version,omitempty"`
	Status       string     `json:"status"`
	LastUpdated  *time.Time `json:"last_updated,omitempty"`
	Error        string     `json:"error,omitempty"`
	FromDisk     bool       `json:"from_disk"`
	Server       string     `json:"server,omitempty"`
	ControlPlane string     `json:"control_plane,omitempty"`
	Watchers     int        `json:"watchers"`
}

type resourceList struct {
	TypeURL   string        `json:"type_url,omitempty"`
	Filter    string        `json:"filter,omitempty"`
	Status    string        `json:"status,omitempty"`
	Page      pageInfo      `json:"page"`
	Resources []resourceRow `json:"resources"`
	// Types are every type the client knows, for the page's type menu.
	Types []string `json:"-"`
}

type resourceDetail struct {
	resourceRow
	Value           json.RawMessage `json:"value,omitempty"`
	ValueError      string          `json:"value_error,omitempty"`
	RejectedVersion string          `json:"rejected_version,omitempty"`
	Rejected        json.RawMessage `json:"rejected,omitempty"`
}

// pageInfo places a page in its list.
type pageInfo struct {
	// Total counts the rows that pass the filter, on every page.
	Total int `json:"total"`
	Page  int `json:"page"`
	Limit int `json:"limit"`
	Pages int `json:"pages"`
	// Prev and Next link the neighbouring pages, "" at either end.
	Prev string `json:"prev,omitempty"`
	Next string `json:"next,omitempty"`
}

// First and Last number the page's rows, from 1, for the page.
func (p pageInfo) First() int { return min((p.Page-1)*p.Limit+1, p.Total) }
func (p pageInfo) Last() int  { return min(p.Page*p.Limit, p.Total) }

// paginate returns the bounds of q's page in a list of total rows.
func paginate(q query, total int) (lo, hi int, p pageInfo) {
	p = pageInfo{Total: total, Page: q.page, Limit: q.limit, Pages: (total + q.limit - 1) / q.limit}
	lo = min((q.page-1)*q.limit, total)
	hi = min(lo+q.limit, total)
	if q.page > 1 {
		p.Prev = pageURL(q, min(q.page-1, max(p.Pages, 1)))
	}
	if hi < total {
		p.Next = pageURL(q, q.page+1)
	}
	return lo, hi, p
}

// pageURL is q's link with page n: a query only, so that the page works
// wherever it is mounted.
func pageURL(q query, n int) string {
	v := make(url.Values, len(q.vals))
	for k, vs := range q.vals {
		v[k] = vs
	}
	v.Set("page", strconv.Itoa(n))
	return "?" + v.Encode()
}

var statusNames = []string{"REQUESTED", "DOES_NOT_EXIST", "ACKED", "NACKED", "RECEIVED_ERROR", "TIMEOUT"}

func validStatus(s string) bool {
	return s == "ERROR" || contains(statusNames, s)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (h *Handler) overview() overview {
	var ov overview
	if n := h.c.Node(); n != nil {
		ov.Node = nodeView{ID: n.GetId(), Cluster: n.GetCluster()}
		if l := n.GetLocality(); l != nil {
			ov.Node.Locality = strings.Trim(l.GetRegion()+"/"+l.GetZone()+"/"+l.GetSubZone(), "/")
		}
	}
	for _, a := range h.c.Authorities() {
		av := authorityView{Name: a.Name, Current: a.Current, FallbackInUse: a.Current > 0}
		for i, s := range a.Servers {
			sv := serverView{URI: s.ServerURI, Current: i == a.Current, Error: errText(s.Err),
				LastError: errText(s.LastErr), LastErrorAt: timePtr(s.LastErrAt), ControlPlane: s.ControlPlane}
			switch {
			case !s.InUse:
				sv.State = "unused"
			case s.Connected:
				sv.State = "connected"
			case s.Err != nil:
				sv.State = "unreachable"
			default:
				sv.State = "connecting"
			}
			if s.InUse {
				sv.Since = timePtr(s.Since)
			}
			av.Servers = append(av.Servers, sv)
		}
		ov.Authorities = append(ov.Authorities, av)
	}
	counts := make(map[string]*typeCount)
	for _, st := range h.c.Dump() {
		tc := counts[st.TypeURL]
		if tc == nil {
			tc = &typeCount{TypeURL: st.TypeURL, ByStatus: make(map[string]int)}
			counts[st.TypeURL] = tc
		}
		tc.Total++
		tc.ByStatus[st.Status.String()]++
		if statusErr(st) != "" {
			tc.Errors++
		}
		if st.FromDisk {
			tc.FromDisk++
		}
	}
	for _, tc := range counts {
		ov.Types = append(ov.Types, *tc)
	}
	sort.Slice(ov.Types, func(i, j int) bool { return ov.Types[i].TypeURL < ov.Types[j].TypeURL })
	h.mu.Lock()
	trees := h.treesLocked()
	h.mu.Unlock()
	ov.Trees = make([]treeSummary, len(trees))
	for i := range trees {
		ov.Trees[i] = summarize(&trees[i])
	}
	return ov
}

func newResourceRow(st client.ResourceStatus) resourceRow {
	return resourceRow{
		TypeURL: st.TypeURL, Name: st.NameWithParameters(), Version: st.Version, Status: st.Status.String(),
		LastUpdated: timePtr(st.LastUpdated), Error: statusErr(st), FromDisk: st.FromDisk,
		Server: st.Server, ControlPlane: st.ControlPlane, Watchers: st.Watchers,
	}
}

// statusErr is the error the page shows for st: its own, or, for a
// resource that does not exist, which the dump reports without one (its
// status says it all to a tool), what its watchers were told.
func statusErr(st client.ResourceStatus) string {
	if st.Err == nil && st.Status == client.StatusDoesNotExist {
		return client.ErrResourceNotFound.Error() + ": the server did not send it in time, or removed it"
	}
	return errText(st.Err)
}

// knownTypes are the type URLs of the client's resource types and of
// whatever its cache holds.
func knownTypes(dump []client.ResourceStatus) []string {
	seen := make(map[string]bool)
	for _, t := range resources.Registered() {
		seen[t.TypeURL()] = true
	}
	for _, st := range dump {
		seen[st.TypeURL] = true
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// resolveType finds the type URL t names: the URL itself, or its message
// name, or the last part of that ("Cluster").
func resolveType(t string, known []string) (string, error) {
	for _, u := range known {
		if u == t || strings.HasSuffix(u, "/"+t) || strings.HasSuffix(u, "."+t) {
			return u, nil
		}
	}
	return "", badRequest("type: no resource type %q (known: %s)", t, strings.Join(known, ", "))
}

func (h *Handler) resourceList(q query) (resourceList, error) {
	dump := h.c.Dump()
	out := resourceList{Filter: q.q, Status: q.status, Types: knownTypes(dump)}
	if q.typ != "" {
		u, err := resolveType(q.typ, out.Types)
		if err != nil {
			return out, err
		}
		out.TypeURL = u
	}
	// One pass: the rows of the page are made, the others only counted.
	first, total := (q.page-1)*q.limit, 0
	out.Resources = make([]resourceRow, 0, min(q.limit, len(dump)))
	for i := range dump {
		st := &dump[i]
		if out.TypeURL != "" && st.TypeURL != out.TypeURL {
			continue
		}
		if q.status == "ERROR" && statusErr(*st) == "" || q.status != "" && q.status != "ERROR" && st.Status.String() != q.status {
			continue
		}
		if q.q != "" && !strings.Contains(st.NameWithParameters(), q.q) {
			continue
		}
		if total >= first && total < first+q.limit {
			out.Resources = append(out.Resources, newResourceRow(*st))
		}
		total++
	}
	_, _, out.Page = paginate(q, total)
	return out, nil
}

func (h *Handler) resource(q query) (resourceDetail, error) {
	if q.typ == "" || q.name == "" {
		return resourceDetail{}, badRequest("view=resource needs type= and name=")
	}
	dump := h.c.Dump()
	u, err := resolveType(q.typ, knownTypes(dump))
	if err != nil {
		return resourceDetail{}, err
	}
	for _, st := range dump {
		if st.TypeURL != u || st.NameWithParameters() != q.name {
			continue
		}
		d := resourceDetail{resourceRow: newResourceRow(st), RejectedVersion: st.RejectedVersion}
		if d.Value, err = valueJSON(st.Value); err != nil {
			d.ValueError = err.Error()
		}
		if d.Rejected, err = valueJSON(st.Rejected); err != nil && d.ValueError == "" {
			d.ValueError = err.Error()
		}
		return d, nil
	}
	return resourceDetail{}, notFound("no %s %q in the client's cache (a resource is there while it is watched)", u, q.name)
}
