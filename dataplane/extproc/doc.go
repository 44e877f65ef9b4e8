// Package extproc is the data plane's external processing (gRFC A93):
// given an external processing filter's configuration
// ([resources.ExtProcConfig], its per-route overrides applied by
// resources.ExtProcOf) it runs the filter on one RPC ([Call]): it sends
// the RPC's events to the processor on one bidirectional stream per RPC,
// opened at the first event the processing modes send, and applies the
// processor's answers. It serves clients and servers of any transport:
// the stream comes from a [Client] the adapter provides, and the
// service's messages (envoy.service.ext_proc.v3 ProcessingRequest and
// ProcessingResponse) are described by the package's own plain types,
// [Request] and [Response], so that it imports neither grpc-go nor
// net/http.
//
// # What a call does
//
//   - Events in the data plane's order, each direction on its own: client
//     headers, client messages, half-close; server headers (end_of_stream
//     for Trailers-Only), server messages, trailers. Each is sent as it
//     happens, without waiting for the answer to an earlier one. The
//     first message carries protocol_config (the body modes); the first
//     of each direction the configured attributes the adapter knows;
//     headers are filtered by forward_rules.
//   - Headers and trailers wait for their answer, whose header_mutation
//     is applied under mutation_rules: a disallowed change is ignored, or
//     with disallow_is_error fails the stream; an invalid one (gRFC A102:
//     a pseudo-header, host, a grpc- header, a name or value gRPC cannot
//     carry) fails the stream. An empty value is set, not removed
//     (keep_empty_value is not read).
//   - Bodies, in GRPC mode, are not held: the processor sends back the
//     messages to use, as many as it likes ([Call.NextClientMessage],
//     [Call.NextServerMessage]); its end_of_stream on a request body is
//     the half-close, after which the client's messages are dropped. A
//     half-close with no message is sent as end_of_stream with
//     end_of_stream_without_message.
//   - A failed stream (a non-OK end, an answer out of order or to an
//     event not sent, CONTINUE_AND_REPLACE, grpc_message_compressed,
//     end_of_stream on a response body, an immediate response with
//     disable_immediate_response) fails the RPC with INTERNAL, unless
//     failure_mode_allow is set and no body was sent yet (or in
//     observability mode): then the RPC goes on untouched.
//   - An OK end: after request_drain (the filter half-closes the stream
//     and holds new events until the processor, having echoed what it
//     had, ends it) the RPC goes on untouched; so it does with no body
//     mode configured. With a body mode and no drain it is a failure.
//   - An immediate response fails the RPC with its grpc_status and
//     details; in answer to the trailers its headers change them.
//   - Observability mode: events are sent marked observability_mode and
//     nothing waits; answers are ignored; [Call.Done] half-closes the
//     stream and closes it deferred_close_timeout later.
//   - Flow control (flow.go): the first message carries flow_control_init
//     (InitialWindow for each path, not in observability mode); once the
//     processor has sent a server_window_update, a client or server
//     message waits for its window, a processor's message beyond its
//     window fails the stream, and the window of the processor's messages
//     is returned as the data plane writes them on. A processor that never
//     sends one is held to nothing, as before the protocol had flow
//     control.
//   - Metrics (metrics.go): with [Processor.WithMetrics], the time each
//     of the RPC's headers, half-close, server headers and trailers spent
//     in the filter (gRFC A93's grpc.client_ext_proc.* and
//     grpc.server_ext_proc.* histograms, which the adapter labels).
//
// # Sessions
//
// Past the request headers a transport's binding drives the Call through
// a [Session] per RPC ([Call.Session]): the sequencing a client and a
// server share (the response headers held until the first message or the
// end; a Trailers-Only response as headers with end_of_stream holding the
// trailers and status; a pump per direction between the processor and
// the peer; the end as trailers with grpc-status; the filter's failure
// overriding the RPC's status), over the RPC's stream toward the other
// side that the binding gives as a [ClientPeer] or [ServerPeer]. Messages
// are protocol buffers, serialized for the processor (the GRPC body
// mode).
//
// # Traces and adapters
//
// The stream is opened in a context with the RPC's values
// ([Processor.NewCall]), and the adapters' channels take their users'
// SideChannelDialOptions, so a tracing stats handler there makes it the
// RPC's child span (gRFC A93). The adapters:
// internal/extprocgrpc (the gRPC processing stream, and the Sessions'
// binding to grpc-go's RPCs on both sides), called by xdsserver (the
// server's filter loop) and by grpcxds with dataplane/httpfilter (the
// client's chain and interceptors).
package extproc
