// Package grpcparity holds only tests: they feed the same resources to
// grpc-go's own xDS client (through its public resolver, linked into the
// test binary) and to goxds, and check that both reach the same verdict,
// or that a difference is one this page of tests names and explains.
package grpcparity
