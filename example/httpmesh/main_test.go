package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs to the end, leaves nothing running (goleak), and each
// scene shows what it says. Counts that depend on chance are held to
// bounds that do not flake: v2's share of the split is Binomial(200, 0.1),
// mean 20, and falls outside [2, 50] with a probability under 1e-7.
func TestDemo(t *testing.T) {
	var buf bytes.Buffer
	if err := run(context.Background(), &buf); err != nil {
		t.Fatalf("run: %v\n%s", err, buf.String())
	}
	out := buf.String()
	// match finds re in the output and returns its submatches as numbers.
	match := func(re string) []int {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("output lacks %s:\n%s", re, out)
		}
		var ns []int
		for _, s := range m[1:] {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%q in %q: %v", s, m[0], err)
			}
			ns = append(ns, n)
		}
		return ns
	}

	split := match(`1\. weighted split 90/10 over 200 requests: v1 (\d+), v2 (\d+), other 0\n`)
	if v1, v2 := split[0], split[1]; v1+v2 != 200 || v2 < 2 || v2 > 50 {
		t.Errorf("split: v1 %d, v2 %d; want 200 in all and v2 in [2, 50]", v1, v2)
	}

	// Round robin alternates bad and v1, so without retries about half
	// fail, and with them every request ends at v1.
	retry := match(`2\. retry: a cluster of bad and v1; without a retry policy (\d+)/10 failed with 503; with retry_on 5xx 10/10 answered by v1 \((\d+) first attempts failed at bad and were retried\)\n`)
	if failed, retried := retry[0], retry[1]; failed < 1 || retried < 1 {
		t.Errorf("retry: %d failed without a retry policy and %d were retried with one; want at least 1 each", failed, retried)
	}

	for _, want := range []string{
		`3. fault: GET /hello: 200 "v1 served /hello"; with x-envoy-fault-abort-request: 503: 503 "fault filter abort" (v1 got 0 requests for it)`,
		`5. RBAC on v1: x-caller: intruder straight to 127.0.0.1:`,
		`: 403 "httpxds: RBAC: access denied`,
		`the frontend through the mesh: 200 "v1 served /hello"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	// The same SPIFFE ID, a new serial: the rotated certificate.
	mtls := regexp.MustCompile(`6\. mTLS: GET /secure: 200 "secure served /secure to \[(\S+)\] \(certificate serial ([0-9a-f]+)\)"; the frontend's certificate files rotated, a new connection: 200 "secure served /secure to \[(\S+)\] \(certificate serial ([0-9a-f]+)\)"`).FindStringSubmatch(out)
	if mtls == nil {
		t.Errorf("output lacks scene 6 (mTLS, rotation):\n%s", out)
	} else if got := fmt.Sprint(mtls[1:]); mtls[1] != frontendSPID || mtls[3] != frontendSPID || mtls[2] == mtls[4] {
		t.Errorf("mTLS: caller, serial before and after the rotation: %s; want %s both times, with two serials", got, frontendSPID)
	}

	// Before the interval bad must have failed at least the detector's
	// request volume (5) to be ejected; after it, nothing reaches bad.
	outlier := match(`4\. outlier ejection: 20 requests: v1 (\d+), 503 from bad (\d+); after the 10s interval, bad ejected: 20 requests: v1 20, bad 0\n`)
	if v1, bad := outlier[0], outlier[1]; v1+bad != 20 || bad < 5 {
		t.Errorf("outlier: before the interval v1 %d, bad %d; want 20 in all, bad at least 5", v1, bad)
	}
}
