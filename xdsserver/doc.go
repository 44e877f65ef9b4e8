// Package xdsserver serves gRPC configured by xDS, as grpc-go's
// xds.NewGRPCServer does (gRFC A36), with RBAC (gRFC A41).
package xdsserver
