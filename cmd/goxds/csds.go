package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	statusv3 "github.com/envoyproxy/go-control-plane/envoy/service/status/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

const csdsSynopsis = "[-tls] [-ca file] [-cert file -key file] [-timeout d] [-json] host:port"

func runCSDS(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("csds", flag.ContinueOnError)
	useTLS := fs.Bool("tls", false, "connect over TLS (default: plaintext, as admin ports usually are)")
	ca := fs.String("ca", "", "with -tls: PEM `file` of the roots to verify the server with (default: the system's)")
	cert := fs.String("cert", "", "with -tls: PEM `file` of a client certificate, for mutual TLS")
	key := fs.String("key", "", "with -tls: PEM `file` of the client certificate's key")
	timeout := fs.Duration("timeout", 10*time.Second, "give up after this `duration`")
	asJSON := fs.Bool("json", false, "print the whole response, resource contents included, in the protobuf JSON mapping")
	if err := parseFlags(fs, args, csdsSynopsis, out); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return badInputf("want one address (host:port) of a CSDS service, got %d arguments", fs.NArg())
	}
	target := fs.Arg(0)
	if !*useTLS && (*ca != "" || *cert != "" || *key != "") {
		return badInputf("-ca, -cert and -key need -tls")
	}
	if (*cert == "") != (*key == "") {
		return badInputf("-cert and -key go together")
	}
	if *timeout <= 0 {
		return badInputf("-timeout must be positive, got %v", *timeout)
	}
	creds := insecure.NewCredentials()
	if *useTLS {
		tc, err := tlsConfig(*ca, *cert, *key)
		if err != nil {
			return badInput(err)
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return badInputf("%s: %v", target, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	resp, err := statusv3.NewClientStatusDiscoveryServiceClient(conn).FetchClientStatus(ctx,
		&statusv3.ClientStatusRequest{ExcludeResourceContents: !*asJSON}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("asking %s for its client status: %w", target, err)
	}
	if *asJSON {
		b, err := protojson.MarshalOptions{Multiline: true}.Marshal(resp)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	printClientStatus(out, resp)
	return nil
}

func tlsConfig(ca, cert, key string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca: %s holds no PEM certificate", ca)
		}
	}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("-cert, -key: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// printClientStatus prints each client of the response: its node, then a
// table of its resources.
func printClientStatus(w io.Writer, resp *statusv3.ClientStatusResponse) {
	configs := resp.GetConfig()
	if len(configs) == 0 {
		fmt.Fprintln(w, "the service reports no xDS clients")
		return
	}
	for i, cfg := range configs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		node := cfg.GetNode()
		fmt.Fprintf(w, "client %d of %d: node %q", i+1, len(configs), node.GetId())
		if node.GetCluster() != "" {
			fmt.Fprintf(w, ", cluster %q", node.GetCluster())
		}
		if ua := node.GetUserAgentName(); ua != "" {
			fmt.Fprintf(w, ", %s %s", ua, node.GetUserAgentVersion())
		}
		if scope := cfg.GetClientScope(); scope != "" {
			fmt.Fprintf(w, ", scope %q", scope)
		}
		fmt.Fprintln(w)
		if n := len(cfg.GetXdsConfig()); n > 0 {
			// The per-type form that predates generic_xds_configs (old
			// Envoys): not read here.
			fmt.Fprintf(w, "  (%d configs in the old per-type form are not shown; -json shows them)\n", n)
		}
		generic := cfg.GetGenericXdsConfigs()
		if len(generic) == 0 {
			fmt.Fprintln(w, "  no resources")
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  TYPE\tNAME\tSTATUS\tVERSION\tERROR")
		for _, g := range generic {
			errText := ""
			if es := g.GetErrorState(); es != nil {
				errText = oneLine(es.GetDetails())
				if v := es.GetVersionInfo(); v != "" {
					errText = fmt.Sprintf("version %q rejected: %s", v, errText)
				}
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", shortType(g.GetTypeUrl()), g.GetName(), g.GetClientStatus(), dash(g.GetVersionInfo()), errText)
		}
		tw.Flush()
	}
}

// shortType is the message name of a type URL: "Listener" for
// type.googleapis.com/envoy.config.listener.v3.Listener.
func shortType(typeURL string) string {
	return typeURL[strings.LastIndexByte(typeURL, '.')+1:]
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
