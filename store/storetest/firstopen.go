package storetest

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// FirstOpensCutShort are the files a writer killed during its very first
// open leaves, by name, each made at a path: a file of zero bytes (killed
// before bbolt wrote its pages) and bbolt's four pages with no patrdb
// bucket (killed before the meta bucket). Every reader reads both as a
// new, empty patrdb file.
var FirstOpensCutShort = map[string]func(path string) error{
	"zero bytes": func(path string) error { return os.WriteFile(path, nil, 0o600) },
	"bbolt's pages": func(path string) error {
		bdb, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			return err
		}
		return bdb.Close()
	},
}
