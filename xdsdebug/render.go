package xdsdebug

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/goxds/xds/resources"
)

// page.html holds every view; html/template escapes everything the page
// shows from servers and the cache, in text, attributes and links alike.
//
//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"resURL":     resURL,
	"clusterURL": func(name string) string { return resURL(resources.ClusterTypeURL, name) },
	"edsURL":     func(name string) string { return resURL(resources.EndpointsTypeURL, name) },
	"ldsURL":     func(name string) string { return resURL(resources.ListenerTypeURL, name) },
	"rdsURL":     func(name string) string { return resURL(resources.RouteConfigTypeURL, name) },
	"listURL":    listURL,
	"shortType":  shortType,
	"valueText":  valueText,
}).Parse(pageHTML))

// pageData is what a view's template is given.
type pageData struct {
	View string
	Now  time.Time
	// JSONURL is this page as JSON.
	JSONURL string
	// Statuses are the choices of the status filter.
	Statuses []string
	Data     any
}

// When shows t (nil: "—") as a UTC time of day, with the date if it is
// not today, and how long before the page it was.
func (p pageData) When(t *time.Time) string {
	if t == nil {
		return "—"
	}
	u, now := t.UTC(), p.Now.UTC()
	layout := "15:04:05"
	if u.YearDay() != now.YearDay() || u.Year() != now.Year() {
		layout = "2006-01-02 15:04:05"
	}
	return u.Format(layout) + " (" + ago(p.Now.Sub(*t)) + ")"
}

// ago is d, rounded to what a reader wants to know.
func ago(d time.Duration) string {
	switch {
	case d < 0:
		return "in " + (-d).Round(time.Second).String()
	case d < time.Second:
		return "just now"
	case d < time.Hour:
		return d.Round(time.Second).String() + " ago"
	case d < 48*time.Hour:
		return d.Round(time.Minute).String() + " ago"
	}
	return fmt.Sprintf("%d days ago", int(d.Hours()/24))
}

func render(w io.Writer, q query, now time.Time, data any) error {
	v := make(url.Values, len(q.vals)+1)
	for k, vs := range q.vals {
		v[k] = vs
	}
	v.Set("format", "json")
	view := q.view
	if view == "" {
		view = "overview"
	}
	return pageTemplate.ExecuteTemplate(w, view, pageData{View: view, Now: now, JSONURL: "?" + v.Encode(), Statuses: statusNames, Data: data})
}

// resURL links the view of one resource.
func resURL(typeURL, name string) string {
	return "?" + url.Values{"view": {"resource"}, "type": {typeURL}, "name": {name}}.Encode()
}

// listURL links the resources view with the given filters (pairs of
// parameter and value; empty values are left out).
func listURL(kv ...string) string {
	v := url.Values{"view": {"resources"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return "?" + v.Encode()
}

// shortType is a type URL's message name without its package:
// "type.googleapis.com/envoy.config.cluster.v3.Cluster" is "Cluster".
func shortType(typeURL string) string {
	return typeURL[strings.LastIndexAny(typeURL, "./")+1:]
}
