package testutils

import (
	"errors"
	"io"
	"net"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	insecurev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/grpc_service/channel_credentials/insecure/v3"
	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"
)

// ProcServer is an external processing service
// (envoy.service.ext_proc.v3.ExternalProcessor, gRFC A93) on 127.0.0.1:
// each processing stream is played by its handler, which the test
// writes as the processor it needs; the stream's metadata is recorded.
type ProcServer struct {
	procv3.UnimplementedExternalProcessorServer
	lis     net.Listener
	srv     *grpc.Server
	handler func(procv3.ExternalProcessor_ProcessServer) error

	mu       sync.Mutex
	metadata []metadata.MD
}

// StartProcServer starts a ProcServer whose handler plays each stream
// (its error ends the stream with it; nil ends it with OK), its gRPC
// server made with opts (its credentials, say: SideTLS.ServerOption).
// Stop it when done.
func StartProcServer(handler func(procv3.ExternalProcessor_ProcessServer) error, opts ...grpc.ServerOption) (*ProcServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &ProcServer{lis: lis, srv: grpc.NewServer(opts...), handler: handler}
	procv3.RegisterExternalProcessorServer(s.srv, s)
	go s.srv.Serve(lis)
	return s, nil
}

// Target is the server's gRPC target URI, for a GrpcService's target_uri
// and an allowed_grpc_services key.
func (s *ProcServer) Target() string { return "passthrough:///" + s.lis.Addr().String() }

// Process implements envoy.service.ext_proc.v3.ExternalProcessor.
func (s *ProcServer) Process(stream procv3.ExternalProcessor_ProcessServer) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	s.mu.Lock()
	s.metadata = append(s.metadata, md)
	s.mu.Unlock()
	return s.handler(stream)
}

// Metadata returns the metadata of the streams opened so far, oldest
// first.
func (s *ProcServer) Metadata() []metadata.MD {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]metadata.MD(nil), s.metadata...)
}

// Stop stops the server at once; streams in progress fail.
func (s *ProcServer) Stop() { s.srv.Stop() }

// ProcessEach is a ProcServer handler that answers each ProcessingRequest
// of a stream with what f returns, in order (none: no answer); an error
// from f ends the stream with it, and the stream ends with OK when the
// filter half-closes it.
func ProcessEach(f func(*procv3.ProcessingRequest) ([]*procv3.ProcessingResponse, error)) func(procv3.ExternalProcessor_ProcessServer) error {
	return func(s procv3.ExternalProcessor_ProcessServer) error {
		for {
			req, err := s.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			resps, err := f(req)
			if err != nil {
				return err
			}
			for _, r := range resps {
				if err := s.Send(r); err != nil {
					return err
				}
			}
		}
	}
}

// ExtProcFilter is an HTTP filter named "proc" configuring the external
// processing filter (gRFC A93) to call target with insecure credentials,
// sending the client's and the server's headers (the default processing
// mode); change, if not nil, edits the message first.
func ExtProcFilter(target string, change func(*extprocv3.ExternalProcessor)) *hcmv3.HttpFilter {
	m := &extprocv3.ExternalProcessor{
		GrpcService: &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{
			TargetUri:                target,
			ChannelCredentialsPlugin: []*anypb.Any{MarshalAny(&insecurev3.InsecureCredentials{})},
		}}},
		ProcessingMode: &extprocv3.ProcessingMode{},
	}
	if change != nil {
		change(m)
	}
	return &hcmv3.HttpFilter{Name: "proc", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: MarshalAny(m)}}
}
