// Package h2settings follows what an HTTP/2 server sends on a client's
// connection, and keeps the latest SETTINGS_MAX_CONCURRENT_STREAMS the
// server announced: gRFC A105 scales connections on it, and grpc-go's
// transport keeps it to itself. The transport reads the connection through
// a [Conn]; the frames are not changed, only looked at.
package h2settings

import "encoding/binary"

// HTTP/2's numbers (RFC 9113, sections 4.1, 6.5 and 6.5.2).
const (
	frameHeaderLen  = 9
	frameSettings   = 0x4
	flagAck         = 0x1
	settingEntryLen = 6
	// settingMaxStreams is SETTINGS_MAX_CONCURRENT_STREAMS.
	settingMaxStreams = 0x3
)

// Follower parses the frame headers of a server's byte stream, skips their
// payloads but those of SETTINGS frames, and reports each
// SETTINGS_MAX_CONCURRENT_STREAMS value it finds. It is fed the bytes as
// they are read, cut anywhere. It gives up for good on a stream that is
// not HTTP/2 as a server sends it: a first frame that is not SETTINGS (a
// TLS record read by mistake, say), or a SETTINGS frame the transport
// would refuse (a stream id, a length not a multiple of 6); the transport
// then fails the connection, or the limit stays as last reported. Not safe
// for concurrent use: a connection has one reader.
type Follower struct {
	// OnMaxStreams is called, on the reading goroutine, with each value of
	// SETTINGS_MAX_CONCURRENT_STREAMS in a SETTINGS frame, in order.
	OnMaxStreams func(uint32)

	hdr  [frameHeaderLen]byte
	hn   int    // bytes of hdr read
	left uint32 // bytes of the current frame's payload not yet read
	// settings: the current payload is a SETTINGS frame's, read entry by
	// entry into ent.
	settings bool
	ent      [settingEntryLen]byte
	en       int
	started  bool // the first frame header was read
	failed   bool
}

// Failed reports that the follower gave up on the stream.
func (f *Follower) Failed() bool { return f.failed }

// Feed follows the next bytes the server sent.
func (f *Follower) Feed(p []byte) {
	for len(p) > 0 && !f.failed {
		if f.left == 0 && f.hn < frameHeaderLen {
			n := copy(f.hdr[f.hn:], p)
			f.hn += n
			p = p[n:]
			if f.hn == frameHeaderLen {
				f.startFrame()
			}
			continue
		}
		n := min(uint32(len(p)), f.left)
		if f.settings {
			f.readSettings(p[:n])
		}
		p = p[n:]
		f.left -= n
		if f.left == 0 {
			f.hn, f.settings = 0, false
		}
	}
}

// startFrame reads the frame header in f.hdr.
func (f *Follower) startFrame() {
	length := uint32(f.hdr[0])<<16 | uint32(f.hdr[1])<<8 | uint32(f.hdr[2])
	typ, flags := f.hdr[3], f.hdr[4]
	stream := binary.BigEndian.Uint32(f.hdr[5:]) &^ (1 << 31)
	first := !f.started
	f.started = true
	if typ == frameSettings {
		if stream != 0 || length%settingEntryLen != 0 || (flags&flagAck != 0 && length != 0) {
			f.failed = true
			return
		}
		f.settings, f.en = flags&flagAck == 0, 0
	} else if first {
		// A server's connection preface is a SETTINGS frame.
		f.failed = true
		return
	}
	f.left = length
	if length == 0 {
		f.hn, f.settings = 0, false
	}
}

// readSettings reads part of a SETTINGS frame's payload.
func (f *Follower) readSettings(p []byte) {
	for len(p) > 0 {
		n := copy(f.ent[f.en:], p)
		f.en += n
		p = p[n:]
		if f.en < settingEntryLen {
			return
		}
		f.en = 0
		if binary.BigEndian.Uint16(f.ent[:2]) == settingMaxStreams && f.OnMaxStreams != nil {
			f.OnMaxStreams(binary.BigEndian.Uint32(f.ent[2:]))
		}
	}
}
