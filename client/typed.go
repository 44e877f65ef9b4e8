package client

import "github.com/goxds/xds/resources"

// WatchListener watches the Listener named name (or "*" for all).
func WatchListener(c *Client, name string, w Watcher[*resources.Listener]) (cancel func()) {
	return Watch(c, resources.ListenerType, name, w)
}

// WatchRouteConfig watches the RouteConfiguration named name.
func WatchRouteConfig(c *Client, name string, w Watcher[*resources.RouteConfig]) (cancel func()) {
	return Watch(c, resources.RouteConfigType, name, w)
}

// WatchCluster watches the Cluster named name (or "*" for all).
func WatchCluster(c *Client, name string, w Watcher[*resources.Cluster]) (cancel func()) {
	return Watch(c, resources.ClusterType, name, w)
}

// WatchEndpoints watches the ClusterLoadAssignment named name: the EDS
// service name of a cluster.
func WatchEndpoints(c *Client, name string, w Watcher[*resources.Endpoints]) (cancel func()) {
	return Watch(c, resources.EndpointsType, name, w)
}

// WatchEndpointCollection watches the LbEndpointCollection named name: the
// endpoints of a locality of an assignment (gRFC A95).
func WatchEndpointCollection(c *Client, name string, w Watcher[*resources.EndpointCollection]) (cancel func()) {
	return Watch(c, resources.EndpointCollectionType, name, w)
}
