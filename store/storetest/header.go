package storetest

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// HeaderAt is where the header of the bucket at bucketPath ("runs/r1",
// "runs/r1/events") lies in the closed file at path: the offset of its
// 16 bytes, root page id then sequence (uint64s in the machine's byte
// order, as bbolt writes them), for a test that damages a header. The
// header is found by descending the parent bucket's pages from its root as
// a seek for the name does; the parent must not be an inline bucket.
func HeaderAt(tb testing.TB, path, bucketPath string) int {
	tb.Helper()
	parts := strings.Split(bucketPath, "/")
	name := parts[len(parts)-1]
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	ps := db.Info().PageSize
	var root uint64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Cursor().Bucket()
		for _, p := range parts[:len(parts)-1] {
			if b = b.Bucket([]byte(p)); b == nil {
				tb.Fatalf("%s: no bucket %q", bucketPath, p)
			}
		}
		root = uint64(b.Root())
		return nil
	})
	_ = db.Close()
	if err != nil || root == 0 {
		tb.Fatalf("%s: parent bucket not found or inline (%v)", bucketPath, err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	ne := binary.NativeEndian
	for id, hops := root, 0; hops < 64; hops++ {
		pg := raw[int(id)*ps:]
		count := int(ne.Uint16(pg[10:]))
		if ne.Uint16(pg[8:]) == 0x01 { // a branch: the last child whose first key <= name
			next := ne.Uint64(pg[16+8:])
			for i := range count {
				e := pg[16+16*i:]
				pos, ksize := int(ne.Uint32(e)), int(ne.Uint32(e[4:]))
				if string(e[pos:pos+ksize]) <= name {
					next = ne.Uint64(e[8:])
				}
			}
			id = next
			continue
		}
		for i := range count {
			at := 16 + 16*i
			e := pg[at:]
			pos, ksize := int(ne.Uint32(e[4:])), int(ne.Uint32(e[8:]))
			if ne.Uint32(e)&0x01 != 0 && string(pg[at+pos:at+pos+ksize]) == name {
				return int(id)*ps + at + pos + ksize
			}
		}
		break
	}
	tb.Fatalf("%s: header not found", bucketPath)
	return 0
}
