// Package instrument is the shape of one metric that the gRFC tables in
// metrics/internal (a78, a91, a94) spell, and that the adapters
// (metrics/otelxds, metrics/promxds) register from them.
package instrument

// Instrument is one counter or gauge: its name, description and unit as
// the gRFC (and grpc-go, where it registers it) spells them, and the
// attribute keys of its measurements, in the order each table's package
// documents.
type Instrument struct {
	Name        string
	Description string
	Unit        string
	Labels      []string
}
