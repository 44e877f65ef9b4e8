package h2settings

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"
)

// frame is an HTTP/2 frame as a server writes it.
func frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}

// settings is a SETTINGS frame of the given id, value pairs.
func settings(pairs ...uint32) []byte {
	var p []byte
	for i := 0; i+1 < len(pairs); i += 2 {
		p = binary.BigEndian.AppendUint16(p, uint16(pairs[i]))
		p = binary.BigEndian.AppendUint32(p, pairs[i+1])
	}
	return frame(frameSettings, 0, 0, p)
}

// follow feeds stream to a new Follower in pieces of size n (all at once
// for 0), and returns the values it reported.
func follow(stream []byte, n int) ([]uint32, *Follower) {
	var got []uint32
	f := &Follower{OnMaxStreams: func(v uint32) { got = append(got, v) }}
	if n == 0 {
		f.Feed(stream)
		return got, f
	}
	for len(stream) > 0 {
		k := min(n, len(stream))
		f.Feed(stream[:k])
		stream = stream[k:]
	}
	return got, f
}

func TestFollower(t *testing.T) {
	const (
		headerTableSize = 0x1
		initialWindow   = 0x4
		maxFrameSize    = 0x5
	)
	ack := frame(frameSettings, flagAck, 0, nil)
	data := frame(0x0, 0x1, 1, bytes.Repeat([]byte{frameSettings}, 300)) // DATA whose bytes look like SETTINGS
	headers := frame(0x1, 0x4, 1, []byte{0x88})
	ping := frame(0x6, 0, 0, make([]byte, 8))
	window := frame(0x8, 0, 0, []byte{0, 0, 1, 0})
	tests := []struct {
		name   string
		stream []byte
		want   []uint32
		failed bool
	}{
		{"preface with the limit", settings(settingMaxStreams, 1), []uint32{1}, false},
		{"preface without it", settings(initialWindow, 65535), nil, false},
		{"empty preface", settings(), nil, false},
		{"several settings", settings(headerTableSize, 4096, settingMaxStreams, 100, maxFrameSize, 16384), []uint32{100}, false},
		{"later SETTINGS changes it", slices.Concat(settings(settingMaxStreams, 1), window, ack, headers, data,
			settings(settingMaxStreams, 7), ping, settings(initialWindow, 1), settings(settingMaxStreams, 0)), []uint32{1, 7, 0}, false},
		{"largest value", settings(settingMaxStreams, 1<<32-1), []uint32{1<<32 - 1}, false},
		{"first frame not SETTINGS", slices.Concat(ping, settings(settingMaxStreams, 1)), nil, true},
		{"TLS record", []byte{0x16, 0x03, 0x03, 0x00, 0x7a, 0x02, 0x00, 0x00, 0x76, 0x03, 0x03}, nil, true},
		{"SETTINGS on a stream", slices.Concat(settings(), frame(frameSettings, 0, 1, make([]byte, 6))), nil, true},
		{"SETTINGS of 7 bytes", slices.Concat(settings(settingMaxStreams, 2), frame(frameSettings, 0, 0, make([]byte, 7))), []uint32{2}, true},
		{"ACK with a payload", slices.Concat(settings(), frame(frameSettings, flagAck, 0, make([]byte, 6))), nil, true},
	}
	for _, tt := range tests {
		// Whole, split across reads at every size (so inside headers and
		// settings entries), and a byte at a time.
		for _, n := range []int{0, 1, 2, 5, 7, 9, 10, 13, 64} {
			got, f := follow(tt.stream, n)
			if !slices.Equal(got, tt.want) || f.Failed() != tt.failed {
				t.Errorf("%s, read %d bytes at a time: reported %v, failed %v; want %v, failed %v", tt.name, n, got, f.Failed(), tt.want, tt.failed)
			}
		}
	}
}

func TestLimitWrap(t *testing.T) {
	changes := 0
	l := NewLimit(func() { changes++ })
	if v, known := l.Get(); known || l.Followed() {
		t.Fatalf("new limit: %d, known %v, followed %v; want unknown, not followed", v, known, l.Followed())
	}
	client, server := net.Pipe()
	defer client.Close()
	c := l.Wrap(client)
	go func() {
		server.Write(slices.Concat(settings(settingMaxStreams, 3), frame(0x6, 0, 0, make([]byte, 8)), settings(settingMaxStreams, 3), settings(settingMaxStreams, 5)))
		server.Close()
	}()
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	if v, known := l.Get(); v != 5 || !known || !l.Followed() {
		t.Errorf("after the server's settings: %d, known %v, followed %v; want 5, known, followed", v, known, l.Followed())
	}
	if changes != 2 {
		t.Errorf("onChange called %d times, want 2 (3, then 5; the repeated 3 is no change)", changes)
	}
	// A new connection's limit is unknown until its server says.
	c2, s2 := net.Pipe()
	defer s2.Close()
	defer c2.Close()
	l.Wrap(c2)
	if _, known := l.Get(); known {
		t.Error("limit known on a new connection before its SETTINGS")
	}
}

func FuzzFollower(f *testing.F) {
	f.Add(settings(settingMaxStreams, 1), 3)
	f.Add(slices.Concat(settings(), frame(0x0, 0, 1, []byte("hello")), settings(1, 2, settingMaxStreams, 9)), 1)
	f.Add([]byte{0x16, 0x03, 0x01, 0x02, 0x00}, 2)
	f.Fuzz(func(t *testing.T, stream []byte, n int) {
		n = max(0, n%64)
		whole, fw := follow(stream, 0)
		split, fs := follow(stream, n)
		// Where the stream is cut must not change what is reported.
		if !slices.Equal(whole, split) || fw.Failed() != fs.Failed() {
			t.Fatalf("whole: %v failed %v; in %d-byte reads: %v failed %v", whole, fw.Failed(), n, split, fs.Failed())
		}
	})
}
