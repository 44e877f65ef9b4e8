package treeevents

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/goxds/xds/watchers"
)

// The queue hands events over in the order the tree told them, and Next
// waits for one until its context ends.
func TestQueueOrderAndWait(t *testing.T) {
	q := NewQueue()
	snap := &watchers.Snapshot{}
	q.Update(snap)
	q.AmbientError(errors.New("ambient"))
	q.ResourceError(errors.New("gone"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, want := range []Event{{Snap: snap}, {Err: errors.New("ambient"), Ambient: true}, {Err: errors.New("gone")}} {
		got, err := q.Next(ctx)
		if err != nil || got.Snap != want.Snap || got.Ambient != want.Ambient || (got.Err == nil) != (want.Err == nil) || got.At.IsZero() {
			t.Fatalf("event %d: %+v, %v; want %+v with its time", i, got, err, want)
		}
	}
	done, stop := context.WithCancel(context.Background())
	stop()
	if _, err := q.Next(done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next on an empty queue with its context ended: %v, want context.Canceled", err)
	}
}
