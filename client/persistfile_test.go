package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/goxds/xds/bootstrap"

	"github.com/goxds/xds/resources"
	"github.com/goxds/xds/testutils"
)

func sampleLKG() *lkgFile {
	return &lkgFile{
		node:    "node-1",
		servers: []string{"a:1", "b:2"},
		typeURL: resources.ClusterTypeURL,
		written: time.Unix(1_700_000_000, 5),
		records: []lkgRecord{
			{name: "c1", version: "1", server: "a:1", written: time.Unix(1_600_000_000, 7), value: []byte("\x0a\x02c1")},
			{name: "c2", version: "7", server: "b:2", written: time.Unix(1_700_000_000, 5), value: []byte{}},
		},
	}
}

func TestLKGRoundTrip(t *testing.T) {
	want := sampleLKG()
	got, err := decodeLKG(encodeLKG(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || !got.written.Equal(want.written) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// A file of version 1, whose records have no time of their own, is still
// read: each record takes the file's time.
func TestLKGVersion1Read(t *testing.T) {
	want := sampleLKG()
	b := []byte(lkgMagicV1)
	putString := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	putString(want.node)
	b = binary.AppendUvarint(b, uint64(len(want.servers)))
	for _, s := range want.servers {
		putString(s)
	}
	putString(want.typeURL)
	b = binary.AppendVarint(b, want.written.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(want.records)))
	for i, r := range want.records {
		putString(r.name)
		putString(r.version)
		b = binary.AppendUvarint(b, uint64(i)) // record i is of server i
		putString(string(r.value))
		want.records[i].written = want.written
	}
	sum := sha256.Sum256(b)
	got, err := decodeLKG(append(b, sum[:]...))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, want %+v", got, want)
	}
}

// Every single-byte change and every truncation is found out, and none
// panics.
func TestLKGDamageFoundOut(t *testing.T) {
	data := encodeLKG(sampleLKG())
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x01
		if _, err := decodeLKG(bad); err == nil {
			t.Fatalf("byte %d flipped: no error", i)
		}
		if _, err := decodeLKG(data[:i]); err == nil {
			t.Fatalf("cut at %d: no error", i)
		}
	}
}

// FuzzDecodeLKG: the reader never panics, and what it accepts survives
// being written and read again. With fixSum the input's last 32 bytes are replaced by
// its checksum, so that the fuzzer reaches the parser behind it.
func FuzzDecodeLKG(f *testing.F) {
	f.Add(encodeLKG(sampleLKG()), false)
	f.Add(encodeLKG(sampleLKG()), true)
	f.Add(encodeLKG(&lkgFile{node: "n", typeURL: "t"}), true)
	f.Add([]byte(lkgMagic), false)
	f.Fuzz(func(t *testing.T, data []byte, fixSum bool) {
		if fixSum && len(data) >= sha256.Size {
			body := data[:len(data)-sha256.Size]
			sum := sha256.Sum256(body)
			data = append(bytes.Clone(body), sum[:]...)
		}
		lf, err := decodeLKG(data)
		if err != nil {
			return
		}
		// Not byte for byte: a varint may be spelt in more than one way.
		again, err := decodeLKG(encodeLKG(lf))
		if err != nil || !reflect.DeepEqual(again, lf) {
			t.Fatalf("accepted %q as %+v, which encodes and decodes back as %+v, %v", data, lf, again, err)
		}
	})
}

// BenchmarkPersistWrite10k measures one rewrite of a type's file holding
// 10,000 clusters: encode, write, fsync, rename, directory fsync.
func BenchmarkPersistWrite10k(b *testing.B) {
	f := &lkgFile{node: "node-1", servers: []string{"xds.example.com:443"}, typeURL: resources.ClusterTypeURL, written: time.Now()}
	size := 0
	for i := range 10_000 {
		name := fmt.Sprintf("cluster-%05d", i)
		raw, err := proto.Marshal(testutils.Cluster(name, name))
		if err != nil {
			b.Fatal(err)
		}
		size += len(raw)
		f.records = append(f.records, lkgRecord{name: name, version: "v1", server: "xds.example.com:443", value: raw})
	}
	path := filepath.Join(b.TempDir(), lkgFileName(f.typeURL))
	b.ReportMetric(float64(size), "resource-bytes")
	b.ResetTimer()
	for range b.N {
		if err := writeFileAtomic(path, encodeLKG(f)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if st, err := os.Stat(path); err == nil {
		b.ReportMetric(float64(st.Size()), "file-bytes")
	}
}

// BenchmarkPersistSnapshot10k measures what the writer does under the
// client mutex for a type of 10,000 clusters: copying out what to write.
func BenchmarkPersistSnapshot10k(b *testing.B) {
	srv := &server{cfg: bootstrap.ServerConfig{ServerURI: "xds.example.com:443"}}
	c := &Client{
		cfg:     &bootstrap.Config{Servers: []bootstrap.ServerConfig{srv.cfg}, Node: bootstrap.Node{ID: "node-1"}},
		caches:  map[string]*typeCache{},
		persist: &persister{}, // nothing kept from an earlier run
	}
	tc := &typeCache{entries: make(map[string]*entry)}
	c.caches[resources.ClusterTypeURL] = tc
	for i := range 10_000 {
		name := fmt.Sprintf("cluster-%05d", i)
		raw, err := proto.Marshal(testutils.Cluster(name, name))
		if err != nil {
			b.Fatal(err)
		}
		tc.entries[name] = &entry{name: name, srv: srv, src: srv, value: snapshotValue(name), valueRaw: raw, version: "v1"}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if f := c.persistSnapshotLocked(resources.ClusterTypeURL); len(f.records) != 10_000 {
			b.Fatalf("%d records, want 10000", len(f.records))
		}
	}
}

// snapshotValue stands for a decoded resource: the snapshot only checks
// that there is one.
type snapshotValue string

func (v snapshotValue) ResourceName() string { return string(v) }
func (v snapshotValue) Proto() proto.Message { return nil }
