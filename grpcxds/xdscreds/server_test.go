package xdscreds_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/goxds/xds/grpcxds/xdscreds"
)

// As grpc-go's, server credentials without a fallback are refused, naming
// the field.
func TestNewServerCredentialsNeedsFallback(t *testing.T) {
	_, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{})
	if err == nil || !strings.Contains(err.Error(), "FallbackCreds") {
		t.Fatalf("NewServerCredentials without FallbackCreds: %v, want an error naming FallbackCreds", err)
	}
}

// fallbackSpy records the connections handed to it.
type fallbackSpy struct {
	credentials.TransportCredentials
	got chan net.Conn
}

func (f fallbackSpy) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	f.got <- c
	return f.TransportCredentials.ServerHandshake(c)
}

// chainConn is a connection of an xDS-enabled server, as xdsserver hands
// it over: tls and err are its filter chain's.
type chainConn struct {
	net.Conn
	tls *tls.Config
	err error
}

func (c chainConn) FilterChainTLS(context.Context) (*tls.Config, error) { return c.tls, c.err }

// A connection not accepted by an xDS-enabled server, or whose filter
// chain has no TLS, is the fallback's; one whose chain cannot have its TLS
// is refused with the chain's error, never handed to the fallback.
func TestServerHandshakeFallbackAndRefusal(t *testing.T) {
	spy := fallbackSpy{insecure.NewCredentials(), make(chan net.Conn, 2)}
	creds, err := xdscreds.NewServerCredentials(xdscreds.ServerOptions{FallbackCreds: spy})
	if err != nil {
		t.Fatal(err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	for _, c := range []net.Conn{a, chainConn{Conn: b}} {
		if _, _, err := creds.ServerHandshake(c); err != nil {
			t.Errorf("ServerHandshake(%T): %v", c, err)
		}
		if got := <-spy.got; got != c {
			t.Errorf("fallback got %v, want %v", got, c)
		}
	}
	bad := errors.New("certificate provider instance \"x\" not in the bootstrap")
	if _, _, err := creds.ServerHandshake(chainConn{Conn: b, err: bad}); !errors.Is(err, bad) {
		t.Errorf("ServerHandshake on a chain that cannot have its TLS: %v, want %v", err, bad)
	}
	select {
	case c := <-spy.got:
		t.Errorf("the fallback got %v, a connection whose chain asks for TLS", c)
	default:
	}
	if _, _, err := creds.ClientHandshake(context.Background(), "x", a); err == nil {
		t.Error("ClientHandshake of server credentials succeeded")
	}
}
