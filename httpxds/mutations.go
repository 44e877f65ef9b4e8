package httpxds

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/goxds/xds/resources"
)

// mutations are the header changes a route's request and response get:
// request_headers_to_add/remove and response_headers_to_add/remove of the
// route, its virtual host and its route configuration, in Envoy's order:
// the route's first, then the virtual host's, then the route
// configuration's, each level removing then adding
// (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_conn_man/headers#custom-request-response-headers).
// With most_specific_header_mutations_wins the order is reversed.
// Values are used as written: Envoy's %VARIABLE% substitutions are not
// made.
type mutations struct {
	request, response []headerStep
}

// headerStep is one level's removals then additions.
type headerStep struct {
	remove []string // canonical names
	add    []headerAdd
}

type headerAdd struct {
	name, value string // canonical name
	action      corev3.HeaderValueOption_HeaderAppendAction
	keepEmpty   bool
}

func (m *mutations) empty() bool { return m == nil || (len(m.request) == 0 && len(m.response) == 0) }

// mutationsOf reads the three levels' header options from their protos.
func mutationsOf(rt *resources.Route, vh *resources.VirtualHost, rc *resources.RouteConfig) *mutations {
	type level struct {
		reqAdd, respAdd       []*corev3.HeaderValueOption
		reqRemove, respRemove []string
	}
	var levels []level
	if p := rt.Raw(); p != nil {
		levels = append(levels, level{p.GetRequestHeadersToAdd(), p.GetResponseHeadersToAdd(), p.GetRequestHeadersToRemove(), p.GetResponseHeadersToRemove()})
	}
	if p := vh.Raw(); p != nil {
		levels = append(levels, level{p.GetRequestHeadersToAdd(), p.GetResponseHeadersToAdd(), p.GetRequestHeadersToRemove(), p.GetResponseHeadersToRemove()})
	}
	if p := rc.Raw(); p != nil {
		levels = append(levels, level{p.GetRequestHeadersToAdd(), p.GetResponseHeadersToAdd(), p.GetRequestHeadersToRemove(), p.GetResponseHeadersToRemove()})
		if p.GetMostSpecificHeaderMutationsWins() {
			// The route configuration's first, the route's last, so that
			// the most specific level's values win.
			slices.Reverse(levels)
		}
	}
	m := &mutations{}
	for _, lv := range levels {
		if s, ok := step(lv.reqRemove, lv.reqAdd); ok {
			m.request = append(m.request, s)
		}
		if s, ok := step(lv.respRemove, lv.respAdd); ok {
			m.response = append(m.response, s)
		}
	}
	return m
}

func step(remove []string, add []*corev3.HeaderValueOption) (headerStep, bool) {
	var s headerStep
	for _, n := range remove {
		if settable(n) {
			s.remove = append(s.remove, textproto.CanonicalMIMEHeaderKey(n))
		}
	}
	for _, o := range add {
		h := o.GetHeader()
		if !settable(h.GetKey()) {
			continue
		}
		v := h.GetValue()
		if v == "" && len(h.GetRawValue()) > 0 {
			v = string(h.GetRawValue())
		}
		a := headerAdd{name: textproto.CanonicalMIMEHeaderKey(h.GetKey()), value: v, action: o.GetAppendAction(), keepEmpty: o.GetKeepEmptyValue()}
		if ap := o.GetAppend(); ap != nil && !ap.GetValue() {
			// The deprecated append: false is OVERWRITE_IF_EXISTS_OR_ADD.
			a.action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		}
		s.add = append(s.add, a)
	}
	return s, len(s.remove) > 0 || len(s.add) > 0
}

// settable: Envoy refuses to change pseudo-headers and host this way.
func settable(name string) bool {
	return name != "" && !strings.HasPrefix(name, ":") && !strings.EqualFold(name, "host")
}

// apply makes the steps' changes to h.
func apply(steps []headerStep, h http.Header) {
	for _, s := range steps {
		for _, n := range s.remove {
			delete(h, n)
		}
		for _, a := range s.add {
			if a.value == "" && !a.keepEmpty {
				continue
			}
			_, has := h[a.name]
			switch a.action {
			case corev3.HeaderValueOption_ADD_IF_ABSENT:
				if !has {
					h[a.name] = []string{a.value}
				}
			case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
				h[a.name] = []string{a.value}
			case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
				if has {
					h[a.name] = []string{a.value}
				}
			default: // APPEND_IF_EXISTS_OR_ADD
				h[a.name] = append(h[a.name], a.value)
			}
		}
	}
}

// mutatingWriter applies the response's header changes when the handler
// starts its response.
type mutatingWriter struct {
	http.ResponseWriter
	steps []headerStep
	done  bool
}

func (w *mutatingWriter) applyOnce() {
	if !w.done {
		w.done = true
		apply(w.steps, w.ResponseWriter.Header())
	}
}

func (w *mutatingWriter) WriteHeader(code int) {
	w.applyOnce()
	w.ResponseWriter.WriteHeader(code)
}

func (w *mutatingWriter) Write(b []byte) (int, error) {
	w.applyOnce()
	return w.ResponseWriter.Write(b)
}

// Flush lets a streaming handler flush through the wrapper.
func (w *mutatingWriter) Flush() {
	w.applyOnce()
	http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *mutatingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
