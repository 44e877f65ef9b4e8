package httpxds_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/goxds/xds/httpxds"
)

// readFromConn is a dialled TCP connection that counts the calls of its
// ReadFrom, the method through which net/http hands a request body to
// the connection whole (sendfile or splice for a file).
type readFromConn struct {
	*net.TCPConn
	calls *atomic.Int32
}

func (c readFromConn) ReadFrom(r io.Reader) (int64, error) {
	c.calls.Add(1)
	return c.TCPConn.ReadFrom(r)
}

// A request body read from a file goes to the dialled connection's
// ReadFrom (on a *net.TCPConn, sendfile) through the Transport's own
// wrappers of the connection, the circuit breakers' and the connection
// metrics', which would otherwise hide it and have net/http copy the
// file through a buffer; the body arrives whole.
func TestClientUploadUsesReadFrom(t *testing.T) {
	t.Run("without connection metrics", func(t *testing.T) { testUploadReadFrom(t, false) })
	t.Run("with connection metrics", func(t *testing.T) { testUploadReadFrom(t, true) })
}

func testUploadReadFrom(t *testing.T, metrics bool) {
	var calls atomic.Int32
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return readFromConn{conn.(*net.TCPConn), &calls}, nil
	}
	e := newCEnv(t, cenvOptions{opts: func(o *httpxds.TransportOptions) {
		o.DialContext = dial
		if metrics {
			o.ConnectionMetrics = newConnRecorder()
		}
	}})
	b := newBackend(t, "b")
	got := make(chan [32]byte, 1)
	b.handler = func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		if _, err := io.Copy(h, r.Body); err != nil {
			t.Errorf("reading the upload: %v", err)
		}
		got <- [32]byte(h.Sum(nil))
	}
	e.update(connWorld(b.port))

	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	path := filepath.Join(t.TempDir(), "upload")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	req, err := http.NewRequest(http.MethodPost, "http://"+svcHost+"/upload", f)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	resp, err := e.do(req)
	if err != nil {
		t.Fatal(err)
	}
	e.want(resp, http.StatusOK, "")
	if sum := recv(t, e, got, "the upload at the backend"); sum != sha256.Sum256(data) {
		t.Error("the backend got a body other than the file's")
	}
	if calls.Load() == 0 {
		t.Error("the file was not handed to the dialled connection's ReadFrom: a wrapper of the connection hides it")
	}
}
