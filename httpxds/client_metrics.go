package httpxds

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/goxds/xds/dataplane/cluster"
	"github.com/goxds/xds/dataplane/endpoint"
)

// OutlierMetrics records what gRFC A91 measures of the Transport's
// outlier detection: each outlier found, ejected
// (grpc.lb.outlier_detection.ejections_enforced) or left in
// (ejections_unenforced, with why). Its methods are those of
// grpcxds.OutlierMetrics, so the same recorders serve both clients:
// metrics/otelxds's NewOutlierMetrics and metrics/promxds's
// NewOutlierCollector implement it.
//
// target is "" (the label's value when a measurement has no channel):
// an HTTP client has no channel target, and a Transport's clusters are
// shared by every host it routes, so no URL host names the clusters an
// ejection is of. backendService is the leaf cluster the endpoint serves;
// method is "consecutive_5xx" or "consecutive_gateway_failure" (Envoy's
// detectors, reported the moment the request that completed the run ends)
// or "success_rate" or "failure_percentage" (at an interval's end); reason
// is "enforcement_percentage" (the detector's enforcing percentage drew
// against the ejection) or "max_ejection_overflow" (max_ejection_percent
// of the endpoints are out already). An endpoint found again while
// ejected is not counted.
//
// Implementations must be safe for concurrent use. They are called from
// the goroutine of the request that completed a run or of an interval's
// timer, with no lock of the Transport held.
type OutlierMetrics interface {
	EjectionEnforced(target, backendService, method string)
	EjectionUnenforced(target, backendService, method, reason string)
}

// ConnectionMetrics records what gRFC A94 measures of a client's
// connections, for the Transport's TCP connections to its endpoints:
// connection attempts succeeded and failed, disconnections with their
// reason, and the connections open. Its methods are those of
// grpcxds.SubchannelMetrics, and the events are judged by the same code
// (dataplane/endpoint's ConnMeter); metrics/otelxds's
// NewHTTPConnectionMetrics and metrics/promxds's
// NewHTTPConnectionCollector implement it on instruments of their own
// (goxds.http.client.*: an HTTP client has no subchannels), and the
// SubchannelMetrics recorders fit too, for one set of grpc.subchannel.*
// series across both clients.
//
// target is "" (as for OutlierMetrics: a Transport's endpoints are
// shared by every host it routes); backendService is the leaf cluster
// and locality the EDS locality ({region="…", zone="…", sub_zone="…"})
// the endpoint was first listed under, kept for its life.
//
// An endpoint has as many connections as net/http opens to it. A
// connection attempt is each dial (every address of the endpoint in
// turn, through its HTTP CONNECT proxy if it has one, and the TLS
// handshake if its cluster has TLS): succeeded when the connection is
// made, failed when it cannot be (refused, timed out, a failed
// handshake); a dial cancelled before it ended is neither. A
// disconnection is a connection made that closes: reason "subchannel
// shutdown" when the Transport closed it (its endpoint left the
// configuration, or the Transport was closed); the socket error it was
// lost with when a read or write failed first ("connection reset",
// "connection timed out", "connection aborted", "socket error"); else
// "unknown" (the backend closed it cleanly, or net/http let it go: an
// idle timeout, a response with "Connection: close").
//
// Implementations must be safe for concurrent use and quick. They are
// called from net/http's dialing and connection goroutines and the
// Transport's, with no lock of the Transport held.
type ConnectionMetrics interface {
	ConnectionAttemptSucceeded(target, backendService, locality string)
	ConnectionAttemptFailed(target, backendService, locality string)
	Disconnection(target, backendService, locality, reason string)
	OpenConnections(target, backendService, locality string, delta int)
}

// connLabels are the labels of the connections of spec's endpoint, nil
// when the Transport does not measure its connections.
func (h *setHost) connLabels(spec cluster.EndpointSpec) *endpoint.ConnLabels {
	if h.conns == nil {
		return nil
	}
	return endpoint.NewConnLabels(spec.Leaf, spec.Locality)
}

// meterConnsLocked has c's transport measure each connection it dials,
// if the Transport measures its connections: tr's dialers are wrapped, the
// TLS one (if any) around the TCP one, so that an attempt ends when the
// connection is usable, after its handshake. The TCP connection is
// wrapped (meteredConn), never the *tls.Conn: net/http looks for that
// type to speak HTTP/2.
func (t *Transport) meterConnsLocked(c *httpConn, tr *http.Transport) {
	tag, _ := c.ep.Tag.(*epTag)
	if t.conns == nil || tag == nil || tag.labels == nil {
		return
	}
	sink, labels := t.conns, tag.labels
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mc, tlsDial := ctx.Value(meteredDialKey{}).(*meteredConn)
		if !tlsDial {
			mc = newMeteredConn(c, sink, labels)
		}
		conn, err := dial(ctx, network, addr)
		if err == nil {
			mc.Conn = conn
		}
		if !tlsDial {
			mc.dialed(ctx, err)
		}
		if err != nil {
			return nil, err
		}
		return mc, nil
	}
	if dialTLS := tr.DialTLSContext; dialTLS != nil {
		// dialTLS dials through tr.DialContext (NewConn), which finds mc
		// in its context.
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mc := newMeteredConn(c, sink, labels)
			conn, err := dialTLS(context.WithValue(ctx, meteredDialKey{}, mc), network, addr)
			mc.dialed(ctx, err)
			return conn, err
		}
	}
}

// meteredDialKey is the context key under which a TLS dial hands its
// meteredConn to the TCP dial under it.
type meteredDialKey struct{}

// meteredConn is a TCP connection of an endpoint's whose life is
// measured: its dial, its first read or write error, its close.
type meteredConn struct {
	net.Conn // set once dialled
	c        *httpConn

	mu sync.Mutex // guards what follows; never held while reporting
	m  *endpoint.ConnMeter
	// dialing: the attempt has not ended (a TLS handshake that fails
	// closes the connection before its dial reports the failure).
	dialing bool
	// closing: Close was called; errors after are its own doing.
	closing bool
	// err is the first read or write error, before Close.
	err error
}

func newMeteredConn(c *httpConn, sink *endpoint.ConnSink, labels *endpoint.ConnLabels) *meteredConn {
	mc := &meteredConn{c: c, m: endpoint.NewConnMeter(sink, labels), dialing: true}
	mc.m.Observe(endpoint.Connecting, nil)
	return mc
}

// dialed ends the attempt with the dial's outcome: err nil, succeeded;
// cancelled, nothing; otherwise failed.
func (mc *meteredConn) dialed(ctx context.Context, err error) {
	mc.mu.Lock()
	mc.dialing = false
	var ev endpoint.ConnEvent
	switch {
	case err == nil && !mc.closing:
		ev = mc.m.Observe(endpoint.Ready, nil)
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		ev = mc.m.Shut() // cut short: no attempt (gRFC A94)
	default:
		ev = mc.m.Observe(endpoint.TransientFailure, err)
	}
	mc.mu.Unlock()
	ev.Report()
}

// noteErr keeps the first error the connection failed with.
func (mc *meteredConn) noteErr(err error) {
	mc.mu.Lock()
	if mc.err == nil && !mc.closing {
		mc.err = err
	}
	mc.mu.Unlock()
}

// Read implements net.Conn.
func (mc *meteredConn) Read(p []byte) (int, error) {
	n, err := mc.Conn.Read(p)
	if err != nil {
		mc.noteErr(err)
	}
	return n, err
}

// Write implements net.Conn.
func (mc *meteredConn) Write(p []byte) (int, error) {
	n, err := mc.Conn.Write(p)
	if err != nil {
		mc.noteErr(err)
	}
	return n, err
}

// ReadFrom implements io.ReaderFrom, for net/http to hand a request body
// to the connection under it whole (a file by sendfile), which embedding
// net.Conn would hide. Its error is the connection's, as Write's is
// (the body's own read errors too: net/http closes the connection for
// them).
func (mc *meteredConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := readFrom(mc.Conn, r)
	if err != nil {
		mc.noteErr(err)
	}
	return n, err
}

// Close implements net.Conn: a connection made is disconnected, for the
// reason its first error gives, or "subchannel shutdown" if the
// Transport let its endpoint go.
func (mc *meteredConn) Close() error {
	mc.mu.Lock()
	first := !mc.closing
	mc.closing = true
	mc.mu.Unlock()
	err := mc.Conn.Close()
	if !first {
		return err
	}
	mc.mu.Lock()
	var ev endpoint.ConnEvent
	switch {
	case mc.dialing: // the dial reports the attempt failed
	case mc.err == nil && mc.c.shut.Load():
		ev = mc.m.Shut()
	default:
		ev = mc.m.Observe(endpoint.Idle, mc.err)
	}
	mc.mu.Unlock()
	ev.Report()
	return err
}
