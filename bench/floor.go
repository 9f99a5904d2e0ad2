package main

import (
	"os"

	"github.com/patrdb/patrdb/bench/workload"
	"github.com/patrdb/patrdb/store"
)

// floorC is the disk floor: the bytes raw bbolt stores for a transaction
// (keys and values, encoded before the clock starts) written with one
// pwrite at the end of a file and one fdatasync. No b-tree, no pages, no
// meta page: what any store that makes a commit durable must at least do.
type floorC struct {
	enc  boltC // encodes what raw bbolt would store, in append order
	f    *os.File
	off  int64
	path string
}

func (c *floorC) name() string    { return cFloor }
func (c *floorC) files() []string { return []string{c.path} }

func (c *floorC) open(path string) error {
	if err := removeStore(path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	c.f, c.path, c.off = f, path, 0
	c.enc = boltC{appendOrder: true}
	c.enc.nodes = nil
	return nil
}

func (c *floorC) prepare(txn []workload.Op) (any, error) {
	if c.enc.nodes == nil {
		c.enc.nodes = map[uint64]*store.Node{}
	}
	p, err := c.enc.prepare(txn)
	if err != nil {
		return nil, err
	}
	var buf []byte
	for _, e := range p.([]kv) {
		buf = append(append(buf, e.k...), e.v...)
	}
	return buf, nil
}

func (c *floorC) apply(prepared any) error {
	buf := prepared.([]byte)
	if _, err := c.f.WriteAt(buf, c.off); err != nil {
		return err
	}
	c.off += int64(len(buf))
	return datasync(c.f)
}

func (c *floorC) close() error {
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}
