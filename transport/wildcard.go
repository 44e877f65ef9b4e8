package transport

// The wildcard ("*", LDS and CDS) has two spellings on the wire. The legacy
// one is a type whose requests on a stream never named anything: an empty
// SotW resource_names, or delta requests with no resource_names_subscribe.
// The explicit one names "*". Once any name (the wildcard included) has gone
// out on a stream for a type, the legacy meaning is over for the rest of that
// stream: an empty list then means "nothing". Some servers in use today
// understand only the legacy spelling (go-control-plane v0.14's snapshot
// cache filters a SotW answer by the literal names requested, and no
// resource is called "*": envoyproxy/go-control-plane#558), so, as Envoy
// does, the client uses it while the wildcard is its only interest of a
// type on the stream, and names "*" only beside other names. Such a server
// still cannot serve a wildcard beside names, or one wanted alone after
// names went out on the stream: it sends the named resources only. A new
// stream would bring the legacy form back; the client does not force one.
// Per stream and type:
//
//   - wildcard alone, nothing named yet on the stream: the legacy form (SotW:
//     empty resource_names, on the first request and every later one; delta:
//     neither subscribe nor unsubscribe names for it, ever);
//   - names added to a legacy wildcard: "*" goes out with them (SotW: "*" and
//     the names, since a list without it would drop the wildcard; delta:
//     subscribe "*" and the names, which the spec does not need, as the
//     wildcard outlives the legacy form there, but which leaves no server in
//     doubt);
//   - wildcard added beside names, or left alone after its names went: "*"
//     explicitly (an empty list would now mean "nothing");
//   - wildcard dropped while the legacy form is in force: no request can say
//     so directly (an empty list, or a delta request subscribing nothing,
//     still means the wildcard), so "*" is named first, ending the legacy
//     form, and the next request drops it (SotW: the list without "*"; delta:
//     unsubscribe "*");
//   - a new stream starts afresh: the form is chosen again from what is
//     wanted.

// wildcardName is resources.Wildcard; transport knows type URLs only.
const wildcardName = "*"

// wildcardOnlyLocked tells whether the wildcard is the only interest of ts.
func (ts *typeState) wildcardOnlyLocked() bool {
	_, ok := ts.names[wildcardName]
	return ok && len(ts.names) == 1
}

// legacyInForceLocked tells whether the server reads the type as a legacy
// wildcard on the current stream: requests went out and none named anything.
func (ts *typeState) legacyInForceLocked() bool {
	return ts.sentOnStream && !ts.namedOnStream
}

// sotwNamesLocked returns the resource_names of the next SotW request of ts.
// send is false when no request may go out: an empty list as the first one
// would ask for the legacy wildcard. more is true when the list is the first
// of the two requests that leave a legacy wildcard: the pending change is
// not complete with it.
func (ts *typeState) sotwNamesLocked() (names []string, send, more bool) {
	switch {
	case len(ts.names) == 0 && !ts.sentOnStream:
		return nil, false, false
	case ts.wildcardOnlyLocked() && !ts.namedOnStream:
		return nil, true, false
	case len(ts.names) == 0 && ts.legacyInForceLocked():
		return []string{wildcardName}, true, true
	}
	return ts.sortedNamesLocked(), true, false
}

// deltaChangesLocked returns the subscribe and unsubscribe lists of the next
// delta request of ts; send and more as for sotwNamesLocked.
func (ts *typeState) deltaChangesLocked() (sub, unsub []string, send, more bool) {
	_, dropWildcard := ts.pendingUnsub[wildcardName]
	switch {
	case !ts.sentOnStream && ts.wildcardOnlyLocked():
		return nil, nil, true, false
	case !ts.sentOnStream && len(ts.pendingSub) == 0:
		// A first request subscribing nothing would read as the legacy
		// wildcard.
		return nil, nil, false, false
	case ts.legacyInForceLocked() && (dropWildcard || len(ts.pendingSub) > 0):
		// Name "*" with whatever is added: the legacy form ends, the
		// wildcard stays until a later request unsubscribes it.
		sub = sortedKeys(ts.pendingSub)
		if _, ok := ts.pendingSub[wildcardName]; !ok {
			sub = append([]string{wildcardName}, sub...)
		}
		return sub, nil, true, dropWildcard
	}
	return sortedKeys(ts.pendingSub), sortedKeys(ts.pendingUnsub), true, false
}

// halfSentLocked records the first request of a two-step leave: the names
// it subscribed are on their way and the legacy form is over, but the
// removal of the wildcard is still to be sent.
func (ts *typeState) halfSentLocked() {
	ts.pendingSub = emptied(ts.pendingSub)
	ts.namedOnStream = true
	ts.subsChanged = true
}
