package grpcxds

// QueuedPlaces counts the places under circuit breakers that RPCs queued
// for a connection hold (scale_held.go).
func QueuedPlaces() int64 { return nQueued.Load() }
