package testutils

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc"
	_ "google.golang.org/grpc/balancer/rls" // registers the grpc.lookup.v1 descriptors
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// gRPC's route lookup protocol (grpc.lookup.v1) has its Go types in an
// internal package of grpc-go; its descriptors are registered once
// balancer/rls is linked, and dynamic messages built on them are all
// a test needs.

// RouteLookupClusterSpecifier returns a grpc.lookup.v1.RouteLookupClusterSpecifier
// whose route_lookup_config is routeLookupConfig, in the proto's JSON form
// (e.g. {"grpcKeybuilders": [...], "lookupService": "127.0.0.1:1234",
// "defaultTarget": "cluster"}), as the typed_config of a cluster specifier
// plugin.
func RouteLookupClusterSpecifier(routeLookupConfig string) (*anypb.Any, error) {
	md, err := lookupMessage("grpc.lookup.v1.RouteLookupClusterSpecifier")
	if err != nil {
		return nil, err
	}
	m := dynamicpb.NewMessage(md)
	if err := protojson.Unmarshal([]byte(`{"routeLookupConfig":`+routeLookupConfig+`}`), m); err != nil {
		return nil, fmt.Errorf("route lookup config: %v", err)
	}
	return anypb.New(m)
}

func lookupMessage(name protoreflect.FullName) (protoreflect.MessageDescriptor, error) {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a message", name)
	}
	return md, nil
}

// RLSRequest is a RouteLookupRequest an RLSServer received.
type RLSRequest struct {
	TargetType string
	Reason     string // REASON_MISS, REASON_STALE, ...
	KeyMap     map[string]string
}

// RLSResponse is what an RLSServer answers: targets (for a gRPC channel
// under xDS, cluster names) and header data for the backends.
type RLSResponse struct {
	Targets    []string
	HeaderData string
}

// RLSServer is a route lookup service (grpc.lookup.v1.RouteLookupService)
// on 127.0.0.1, answering each lookup with its handler and recording it.
type RLSServer struct {
	lis      net.Listener
	srv      *grpc.Server
	handler  func(RLSRequest) (RLSResponse, error)
	req, res protoreflect.MessageDescriptor

	mu       sync.Mutex
	requests []RLSRequest
}

// RLSTargetsByKey is an RLSServer handler that names, for a request whose
// key key has a value in targets, that value's target, and fails any
// other lookup with NOT_FOUND.
func RLSTargetsByKey(key string, targets map[string]string) func(RLSRequest) (RLSResponse, error) {
	return func(r RLSRequest) (RLSResponse, error) {
		if target, ok := targets[r.KeyMap[key]]; ok {
			return RLSResponse{Targets: []string{target}}, nil
		}
		return RLSResponse{}, status.Errorf(codes.NotFound, "no target for %v", r.KeyMap)
	}
}

// StartRLSServer starts an RLSServer; an error from handler fails the
// lookup with it (a status error keeps its code).
func StartRLSServer(handler func(RLSRequest) (RLSResponse, error)) (*RLSServer, error) {
	req, err := lookupMessage("grpc.lookup.v1.RouteLookupRequest")
	if err != nil {
		return nil, err
	}
	res, err := lookupMessage("grpc.lookup.v1.RouteLookupResponse")
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &RLSServer{lis: lis, srv: grpc.NewServer(), handler: handler, req: req, res: res}
	s.srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: "grpc.lookup.v1.RouteLookupService",
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{{MethodName: "RouteLookup", Handler: s.routeLookup}},
	}, s)
	go s.srv.Serve(lis)
	return s, nil
}

// Address is the server's host:port.
func (s *RLSServer) Address() string { return s.lis.Addr().String() }

// Requests returns the lookups received so far, in order.
func (s *RLSServer) Requests() []RLSRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RLSRequest(nil), s.requests...)
}

// Stop stops the server and closes its connections.
func (s *RLSServer) Stop() { s.srv.Stop() }

func (s *RLSServer) routeLookup(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	in := dynamicpb.NewMessage(s.req)
	if err := dec(in); err != nil {
		return nil, err
	}
	fields := s.req.Fields()
	r := RLSRequest{
		TargetType: in.Get(fields.ByName("target_type")).String(),
		KeyMap:     make(map[string]string),
	}
	reason := fields.ByName("reason")
	if ev := reason.Enum().Values().ByNumber(in.Get(reason).Enum()); ev != nil {
		r.Reason = string(ev.Name())
	}
	in.Get(fields.ByName("key_map")).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		r.KeyMap[k.String()] = v.String()
		return true
	})
	s.mu.Lock()
	s.requests = append(s.requests, r)
	s.mu.Unlock()
	if s.handler == nil {
		return nil, errors.New("no handler")
	}
	resp, err := s.handler(r)
	if err != nil {
		return nil, err
	}
	out := dynamicpb.NewMessage(s.res)
	targets := out.Mutable(s.res.Fields().ByName("targets")).List()
	for _, t := range resp.Targets {
		targets.Append(protoreflect.ValueOfString(t))
	}
	out.Set(s.res.Fields().ByName("header_data"), protoreflect.ValueOfString(resp.HeaderData))
	return out, nil
}
