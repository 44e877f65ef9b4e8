package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/goxds/xds/internal/treeevents"
	"github.com/goxds/xds/watchers"
)

// eventJSON is watch's -json form of an event: one object per line, so
// that a script reads events as they come (jq -c, a line reader).
type eventJSON struct {
	Time string `json:"time"`
	// Event is "snapshot" (a new complete tree), "resource_error" (the
	// tree cannot be had: no snapshot until it can) or "ambient_error"
	// (the last snapshot stays in force).
	Event string `json:"event"`
	Error string `json:"error,omitempty"`
	// Tree is the snapshot as watchers.Snapshot.Tree gives it: the nodes
	// the text output prints as lines.
	Tree *watchers.TreeNode `json:"tree,omitempty"`
}

func printEventJSON(w io.Writer, ev treeevents.Event) {
	out := eventJSON{Time: ev.At.UTC().Format(time.RFC3339Nano)}
	switch {
	case ev.Ambient:
		out.Event, out.Error = "ambient_error", ev.Err.Error()
	case ev.Err != nil:
		out.Event, out.Error = "resource_error", ev.Err.Error()
	default:
		out.Event, out.Tree = "snapshot", ev.Snap.Tree()
	}
	b, err := json.Marshal(out)
	if err != nil {
		// Strings only: it cannot fail; say so if it ever does.
		fmt.Fprintf(w, "{\"event\":\"error\",\"error\":%q}\n", err.Error())
		return
	}
	fmt.Fprintf(w, "%s\n", b)
}
