package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// splitRequests is how many requests the weighted split is counted over.
const splitRequests = 200

// response is what a request got: its status and body.
type response struct {
	status int
	body   string
}

// get sends a GET for url with hc, with headers ("Name: value"), and
// reads the whole response.
func get(ctx context.Context, hc *http.Client, url string, headers ...string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := hc.Do(req)
	if err != nil {
		return response{}, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	return response{status: resp.StatusCode, body: strings.TrimSpace(string(b))}, nil
}

// play runs the scenes and prints what each shows.
func (m *mesh) play(ctx context.Context) error {
	if err := m.ms.Update(ctx, nodeID, m.resources()); err != nil {
		return err
	}
	if err := m.waitServing(ctx); err != nil {
		return err
	}
	fmt.Fprintf(m.out, "the backends' Listeners arrived: v1, v2, bad and secure serving\n")
	for _, scene := range []func(context.Context) error{m.split, m.retry, m.fault, m.outlier, m.rbac, m.mtls} {
		if err := scene(ctx); err != nil {
			return err
		}
	}
	return nil
}

// count sends n requests for path with hc and tallies the answers: by
// the version that served them, or by status for the others.
func count(ctx context.Context, hc *http.Client, path string, n int) (map[string]int, error) {
	got := make(map[string]int)
	for range n {
		r, err := get(ctx, hc, "http://"+host+path)
		if err != nil {
			return nil, err
		}
		if r.status == http.StatusOK {
			version, _, _ := strings.Cut(r.body, " ")
			got[version]++
		} else {
			got[fmt.Sprint(r.status)]++
		}
	}
	return got, nil
}

// split: a route's weighted clusters, drawn once per request.
func (m *mesh) split(ctx context.Context) error {
	got, err := count(ctx, m.hc, pathSplit, splitRequests)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "1. weighted split 90/10 over %d requests: v1 %d, v2 %d, other %d\n",
		splitRequests, got["v1"], got["v2"], splitRequests-got["v1"]-got["v2"])
	return nil
}

// retry: the same cluster of bad and v1, without and with retry_on 5xx;
// each attempt picks an endpoint anew (round robin), so a request bad
// fails is sent again to v1.
func (m *mesh) retry(ctx context.Context) error {
	const n = 10
	without, err := count(ctx, m.hc, pathNoRetry, n)
	if err != nil {
		return err
	}
	badBefore := m.bad.hits.Load()
	with, err := count(ctx, m.hc, pathRetry, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "2. retry: a cluster of bad and v1; without a retry policy %d/%d failed with 503; with retry_on 5xx %d/%d answered by v1 (%d first attempts failed at bad and were retried)\n",
		without["503"], n, with["v1"], n, m.bad.hits.Load()-badBefore)
	return nil
}

// fault: the listener's fault filter aborts a request that asks with
// x-envoy-fault-abort-request, before it is sent.
func (m *mesh) fault(ctx context.Context) error {
	plain, err := get(ctx, m.hc, "http://"+host+"/hello")
	if err != nil {
		return err
	}
	before := m.v1.hits.Load()
	aborted, err := get(ctx, m.hc, "http://"+host+"/hello", "x-envoy-fault-abort-request: 503")
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "3. fault: GET /hello: %d %q; with x-envoy-fault-abort-request: 503: %d %q (v1 got %d requests for it)\n",
		plain.status, plain.body, aborted.status, aborted.body, m.v1.hits.Load()-before)
	return nil
}

// outlier: bad fails every request of the pool cluster; at the
// detector's interval failure_percentage ejects it, and the requests
// reach only v1.
func (m *mesh) outlier(ctx context.Context) error {
	const n = 20
	before, err := count(ctx, m.ohc, pathPool, n)
	if err != nil {
		return err
	}
	// The interval's timer runs in Advance, which returns once it has.
	m.clock.Advance(outlierInterval)
	badBefore := m.bad.hits.Load()
	after, err := count(ctx, m.ohc, pathPool, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "4. outlier ejection: %d requests: v1 %d, 503 from bad %d; after the %v interval, bad ejected: %d requests: v1 %d, bad %d\n",
		n, before["v1"], before["503"], outlierInterval, n, after["v1"], m.bad.hits.Load()-badBefore)
	return nil
}

// rbac: the backends' RBAC allows only the frontend; a caller straight
// to v1 without its x-caller is refused.
func (m *mesh) rbac(ctx context.Context) error {
	url := "http://" + m.v1.lis.Addr().String() + "/hello"
	intruder, err := get(ctx, http.DefaultClient, url, "x-caller: intruder")
	if err != nil {
		return err
	}
	viaMesh, err := get(ctx, m.hc, "http://"+host+"/hello")
	if err != nil {
		return err
	}
	fmt.Fprintf(m.out, "5. RBAC on v1: x-caller: intruder straight to %s: %d %q; the frontend through the mesh: %d %q\n",
		m.v1.lis.Addr(), intruder.status, intruder.body, viaMesh.status, viaMesh.body)
	return nil
}

// serialRE finds the serial number of the caller's certificate in
// secure's answer.
var serialRE = regexp.MustCompile(`certificate serial ([0-9a-f]+)`)

// mtls: the frontend reaches secure over mTLS, the cluster's
// UpstreamTlsContext and the server Listener's DownstreamTlsContext both
// from the bootstrap's file_watcher providers. Then the frontend's
// certificate files are rewritten with a new certificate: the provider
// reads them again within its refresh_interval, and from then on new
// connections (secure closes each after its response) present it.
func (m *mesh) mtls(ctx context.Context) error {
	url := "http://" + host + pathSecure
	first, err := get(ctx, m.hc, url)
	if err != nil {
		return err
	}
	old := serialRE.FindStringSubmatch(first.body)
	if first.status != http.StatusOK || old == nil {
		return fmt.Errorf("GET %s over mTLS: %d %q", url, first.status, first.body)
	}
	if _, _, err := m.pki.Issue("frontend", frontendSPID, true); err != nil {
		return fmt.Errorf("rotating the frontend's certificate: %w", err)
	}
	// Wait for the provider's next read of the files: until then new
	// connections still present the old certificate (as they should).
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := get(ctx, m.hc, url)
		if err != nil {
			return fmt.Errorf("after the rotation: %w", err)
		}
		if r.status != http.StatusOK {
			return fmt.Errorf("after the rotation: GET %s: %d %q", url, r.status, r.body)
		}
		if now := serialRE.FindStringSubmatch(r.body); now != nil && now[1] != old[1] {
			fmt.Fprintf(m.out, "6. mTLS: GET %s: %d %q; the frontend's certificate files rotated, a new connection: %d %q\n",
				pathSecure, first.status, first.body, r.status, r.body)
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("the frontend never presented its rotated certificate (serial still %s): %w", old[1], ctx.Err())
		}
	}
}
