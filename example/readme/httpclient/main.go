// Command httpclient sends a plain HTTP request routed by xDS through
// goxds's http.RoundTripper: the README's HTTP client example, kept here
// so that it compiles.
package main

import (
	"fmt"
	"io"
	"log"

	"github.com/goxds/xds/httpxds"
)

func main() {
	// The bootstrap comes from GRPC_XDS_BOOTSTRAP. The URL's host names
	// the Listener ("users.svc:8080" with the default template), whose
	// routes and clusters are followed live.
	hc, tr, err := httpxds.NewClient(httpxds.TransportOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	resp, err := hc.Get("http://users.svc:8080/v1/users/42")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, string(body))
}
