package server

import (
	"net/http"
	"strconv"
)

// backup is GET /api/v1/backup: a consistent copy of the whole file as
// one commit left it (store.DB.Backup, bbolt's Tx.WriteTo), streamed with
// its length; writers go on meanwhile. It is how patrdb backup and export
// read a file a server holds.
func (s *server) backup(w http.ResponseWriter, _ *http.Request) error {
	started := false
	_, err := s.db.Backup(w, func(size int64) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.Header().Set("Content-Disposition", `attachment; filename="patrdb-backup.db"`)
		started = true
	})
	if err != nil && started {
		// Part of the copy is out: cut the connection, so the client sees
		// a short body, never a whole-looking file.
		panic(http.ErrAbortHandler)
	}
	return err
}
