package server

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/patrdb/patrdb/store"
)

// GET /api/v1/backup sends the whole file as one commit left it, with its
// length: the copy opens and holds the run; behind a token it needs it.
func TestBackupSendsAConsistentCopy(t *testing.T) {
	e := newEnv(t, Options{Token: "0123456789abcdef0123"})
	if err := e.db.Update(func(tx *store.Tx) error {
		_, err := tx.CreateRun("r", nil, nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/api/v1/backup", nil)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", resp.StatusCode)
	}
	var buf bytes.Buffer
	n, err := e.c.Backup(context.Background(), &buf)
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("backup: %d bytes, %v", n, err)
	}
	path := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := store.Open(path, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	if err := cp.View(func(tx *store.Tx) error { _, err := tx.Run("r"); return err }); err != nil {
		t.Errorf("the copy: %v", err)
	}
	if vs, err := cp.Check(nil); err != nil || len(vs) > 0 {
		t.Errorf("check of the copy: %v %v", err, vs)
	}
}
