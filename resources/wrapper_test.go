package resources

import (
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestUnwrap(t *testing.T) {
	body := toAny(edsCluster("c", ""))
	tests := []struct {
		name      string
		in        *anypb.Any
		want      Envelope
		heartbeat bool
		wantErr   string
	}{
		{name: "plain body", in: body, want: Envelope{Body: body}},
		{
			name: "wrapped with ttl",
			in: toAny(&discoveryv3.Resource{
				Name: "c", Version: "v1", Aliases: []string{"alias"}, Ttl: durationpb.New(30 * time.Second), Resource: body,
			}),
			want: Envelope{Wrapped: true, Name: "c", Version: "v1", Aliases: []string{"alias"}, TTL: 30 * time.Second, HasTTL: true, Body: body},
		},
		{
			name: "wrapped without ttl",
			in:   toAny(&discoveryv3.Resource{Name: "c", Version: "v1", Resource: body}),
			want: Envelope{Wrapped: true, Name: "c", Version: "v1", Body: body},
		},
		{
			name: "name from resource_name",
			in:   toAny(&discoveryv3.Resource{ResourceName: &discoveryv3.ResourceName{Name: "rn"}, Resource: body}),
			want: Envelope{Wrapped: true, Name: "rn", Body: body},
		},
		{
			name:      "heartbeat",
			in:        toAny(&discoveryv3.Resource{Name: "c", Version: "v1", Ttl: durationpb.New(time.Second)}),
			want:      Envelope{Wrapped: true, Name: "c", Version: "v1", TTL: time.Second, HasTTL: true},
			heartbeat: true,
		},
		{name: "negative ttl", in: toAny(&discoveryv3.Resource{Name: "c", Ttl: durationpb.New(-time.Second), Resource: body}),
			wantErr: `resource "c": ttl must be positive, got -1s`},
		{name: "zero ttl", in: toAny(&discoveryv3.Resource{Name: "c", Ttl: durationpb.New(0), Resource: body}),
			wantErr: "ttl must be positive"},
		{name: "invalid ttl", in: toAny(&discoveryv3.Resource{Name: "c", Ttl: &durationpb.Duration{Seconds: 1, Nanos: -5}, Resource: body}),
			wantErr: `resource "c": ttl:`},
		{
			name:    "nested wrapper",
			in:      toAny(&discoveryv3.Resource{Name: "outer", Resource: toAny(&discoveryv3.Resource{Name: "inner", Resource: body})}),
			wantErr: `resource "outer": a discovery.v3.Resource wrapper may not wrap another`,
		},
		{name: "garbage bytes", in: &anypb.Any{TypeUrl: WrapperTypeURL, Value: []byte{0x0a, 0x7f, 0x01}},
			wantErr: "unmarshal discovery.v3.Resource wrapper"},
		{name: "nil", in: nil, wantErr: "empty resource"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := Unwrap(tt.in)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if env.Wrapped != tt.want.Wrapped || env.Name != tt.want.Name || env.Version != tt.want.Version ||
				env.TTL != tt.want.TTL || env.HasTTL != tt.want.HasTTL || len(env.Aliases) != len(tt.want.Aliases) ||
				!proto.Equal(env.Body, tt.want.Body) {
				t.Errorf("Unwrap = %+v, want %+v", env, tt.want)
			}
			if env.IsHeartbeat() != tt.heartbeat {
				t.Errorf("IsHeartbeat = %v, want %v", env.IsHeartbeat(), tt.heartbeat)
			}
		})
	}
}

func TestUnwrapThenDecode(t *testing.T) {
	env, err := Unwrap(toAny(&discoveryv3.Resource{Name: "c", Version: "3", Resource: toAny(edsCluster("c", "svc"))}))
	if err != nil {
		t.Fatal(err)
	}
	typ, ok := Lookup(env.Body.GetTypeUrl())
	if !ok {
		t.Fatalf("no type for %s", env.Body.GetTypeUrl())
	}
	name, v, err := typ.Decode(nil, env.Body)
	if err != nil || name != env.Name || v.(*Cluster).EDSServiceName() != "svc" {
		t.Errorf("Decode = %q, %v, %v", name, v, err)
	}
}

func TestFromResourceNil(t *testing.T) {
	if _, err := FromResource(nil); err == nil {
		t.Error("FromResource(nil) succeeded")
	}
	env, err := FromResource(&discoveryv3.Resource{Name: "x"})
	if err != nil || !env.IsHeartbeat() || env.HasTTL {
		t.Errorf("FromResource without body = %+v, %v", env, err)
	}
	if (&Envelope{}).IsHeartbeat() {
		t.Error("a plain envelope is not a heartbeat")
	}
}
