package main

import (
	"github.com/goxds/xds/grpcxds"
	"github.com/goxds/xds/resources"
)

// grpcRegistry is the registry of resource types, HTTP filters and cluster
// specifier plugins the tool's clients judge with: that of a goxds gRPC
// channel's client (a grpcxds Builder's), the built-ins and the RLS plugin,
// so that validate's verdict and watch's tree are what a gRPC client of the
// mesh would see. (The default registry alone lacks RLS: a client that
// routes no gRPC would NACK a route configuration requiring it.)
func grpcRegistry() *resources.Registry {
	reg := resources.DefaultRegistry().Clone()
	if err := grpcxds.RegisterRLS(reg); err != nil {
		// A fresh clone of the default holds no RLS plugin: cannot happen.
		panic("goxds: " + err.Error())
	}
	return reg
}
