package testutils

import (
	"net"
	"sync"

	procv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
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
// (its error ends the stream with it; nil ends it with OK). Stop it when
// done.
func StartProcServer(handler func(procv3.ExternalProcessor_ProcessServer) error) (*ProcServer, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &ProcServer{lis: lis, srv: grpc.NewServer(), handler: handler}
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
