package bootstrap_test

import (
	"fmt"
	"log"

	"github.com/goxds/xds/bootstrap"
)

func ExampleParse() {
	cfg, err := bootstrap.Parse([]byte(`{
	  "xds_servers": [{
	    "server_uri": "xds.example.com:443",
	    "channel_creds": [{"type": "mystery"}, {"type": "insecure"}],
	    "server_features": ["xds_v3", "ignore_resource_deletion"],
	    "api_type": "AGGREGATED_DELTA_GRPC"
	  }],
	  "node": {"id": "pod-1.default", "locality": {"zone": "us-central1-a"}},
	  "authorities": {"td.example.com": {}}
	}`))
	if err != nil {
		log.Fatal(err)
	}
	s := cfg.Servers[0]
	fmt.Println(s)
	fmt.Println("ignore deletions:", s.IgnoreResourceDeletion())
	fmt.Println("node:", cfg.Node.ID, cfg.Node.Locality.Zone)
	fmt.Println(cfg.ListenerResourceName("greeter.default:50051"))
	name, _ := cfg.AuthorityListenerResourceName("td.example.com", "greeter")
	fmt.Println(name)

	_, err = bootstrap.Parse([]byte(`{"xds_servers": [{"server_uri": 443}]}`))
	fmt.Println(err)
	// Output:
	// xds.example.com:443 [creds=insecure api_type=AGGREGATED_DELTA_GRPC features=xds_v3,ignore_resource_deletion]
	// ignore deletions: true
	// node: pod-1.default us-central1-a
	// greeter.default:50051
	// xdstp://td.example.com/envoy.config.listener.v3.Listener/greeter
	// bootstrap: xds_servers[0].server_uri: must be a string, got number
}
