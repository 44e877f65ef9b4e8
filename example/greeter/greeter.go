package main

import (
	"context"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The greeter service, defined by hand: one unary method whose request and
// reply are google.protobuf.StringValue, so that no code generation is
// needed. The reply names the backend that served the call, which is how
// the demo counts where traffic goes.

const sayHello = "/goxds.example.Greeter/SayHello"

type greeterServer interface {
	SayHello(context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
}

var greeterDesc = grpc.ServiceDesc{
	ServiceName: "goxds.example.Greeter",
	HandlerType: (*greeterServer)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "SayHello",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			return srv.(greeterServer).SayHello(ctx, in)
		},
	}},
}

// backend is one greeter server on a free port of 127.0.0.1.
type backend struct {
	name     string
	locality string // for printing
	port     uint32
	srv      *grpc.Server
	wg       sync.WaitGroup
}

func (b *backend) SayHello(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String(b.name), nil
}

// startBackend starts a backend; stop it with stop.
func startBackend(name, locality string) (*backend, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backend{name: name, locality: locality, port: uint32(lis.Addr().(*net.TCPAddr).Port), srv: grpc.NewServer()}
	b.srv.RegisterService(&greeterDesc, b)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = b.srv.Serve(lis)
	}()
	return b, nil
}

func (b *backend) stop() {
	b.srv.Stop()
	b.wg.Wait()
}

// greet makes one call and returns the name of the backend that served it.
func greet(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	reply := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, sayHello, wrapperspb.String("gopher"), reply, grpc.WaitForReady(true))
	return reply.GetValue(), err
}
