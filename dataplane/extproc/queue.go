package extproc

import "sync"

// msgQueue holds the messages of one direction for the data plane: the
// processor's (GRPC body mode) or the RPC's own, passed through. It has
// one reader, the data plane (Call.next). A put may be bounded: it then
// waits while outDepth messages are queued, which pushes back on the
// sender. The processor's messages are bounded only while flow control
// is off: with it on, the processor's window bounds them, and waiting
// would stop its stream as a whole, the other direction's messages and
// the header answers with it (the deadlock gRFC A93's flow control is
// there to prevent).
type msgQueue struct {
	dir   int // dirClient or dirServer
	mu    sync.Mutex
	items []outMsg
	ready chan struct{} // a message was put (capacity 1)
	space chan struct{} // a message was taken (capacity 1)
}

func newQueue(dir int) *msgQueue {
	return &msgQueue{dir: dir, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// signal wakes a waiter on ch, if none is woken already.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// put queues o; bounded, it first waits for room. false: done ended the
// wait, and o was not queued.
func (q *msgQueue) put(done <-chan struct{}, o outMsg, bounded bool) bool {
	for {
		q.mu.Lock()
		if !bounded || len(q.items) < outDepth {
			q.items = append(q.items, o)
			room := len(q.items) < outDepth
			q.mu.Unlock()
			signal(q.ready)
			if bounded && room {
				// Pass the wake on: two takes may have left one signal for
				// two waiting puts.
				signal(q.space)
			}
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-done:
			return false
		}
	}
}

// take returns the first message queued, if any.
func (q *msgQueue) take() (outMsg, bool) {
	q.mu.Lock()
	if len(q.items) == 0 {
		q.mu.Unlock()
		return outMsg{}, false
	}
	o := q.items[0]
	q.items[0] = outMsg{}
	q.items = q.items[1:]
	q.mu.Unlock()
	signal(q.space)
	return o, true
}
