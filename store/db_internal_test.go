package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The DB's own descriptor is of the file bbolt opened: a file renamed over
// the path between bbolt's open and the DB's is refused with the next
// step, not walked in the other's place; the file that was there, or one
// bbolt just created (nothing before), is taken.
func TestSameFileRefusesAFileReplacedDuringOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	if err := os.WriteFile(path, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := sameFile(path, before)
	if err != nil {
		t.Fatalf("the same file: %v", err)
	}
	f.Close()
	if f, err = sameFile(path, nil); err != nil {
		t.Fatalf("a file bbolt created: %v", err)
	}
	f.Close()

	other := filepath.Join(dir, "b.db")
	if err := os.WriteFile(other, []byte("second"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	f, err = sameFile(path, before)
	if err == nil || f != nil || !strings.Contains(err.Error(), "replaced while it was being opened; open it again") {
		t.Fatalf("a file renamed over the path: %v, %v", f, err)
	}
	if _, err := sameFile(filepath.Join(dir, "gone.db"), nil); err == nil {
		t.Fatal("a missing file opened")
	}
}
