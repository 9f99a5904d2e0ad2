package server

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"testing"
)

// The vendored chart library is the release its README names, byte for
// byte: an edit by hand would be lost at the next update.
func TestVendoredFilesMatchTheirSums(t *testing.T) {
	readme, err := os.ReadFile("web/vendor/README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (\S+) \| ([0-9a-f]{64}) \|$`).FindAllStringSubmatch(string(readme), -1)
	if len(rows) != 2 {
		t.Fatalf("web/vendor/README.md lists %d files with sums, want 2", len(rows))
	}
	for _, r := range rows {
		b, err := webFiles.ReadFile("web/vendor/" + r[1])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != r[2] {
			t.Errorf("%s: sha256 %s, the README says %s", r[1], got, r[2])
		}
	}
}
