package resources

// The built-in types register themselves, so a client resolves
// ListenerTypeURL and the rest through Lookup without further set-up.
func init() {
	for _, t := range []AnyType{
		ListenerType, RouteConfigType, ClusterType, EndpointsType,
		SecretType, RuntimeType, ScopedRouteConfigType, VirtualHostType,
		EndpointCollectionType,
	} {
		mustRegister(t)
	}
}
