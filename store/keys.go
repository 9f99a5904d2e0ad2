package store

import "encoding/binary"

// Keys are big-endian so a cursor walks them in numeric order.

func u64key(a uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, a)
	return k
}

func u64key2(a, b uint64) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	return k
}

func u64key3(a, b, c uint64) []byte {
	k := make([]byte, 24)
	binary.BigEndian.PutUint64(k, a)
	binary.BigEndian.PutUint64(k[8:], b)
	binary.BigEndian.PutUint64(k[16:], c)
	return k
}

// turnKey is node|index; index is the turn's position among the node's own
// turns, so rewriting a turn after a crash overwrites it.
func turnKey(node uint64, index int) []byte { return u64key2(node, uint64(index)) }

func keyU64(k []byte, i int) uint64 { return binary.BigEndian.Uint64(k[i*8:]) }

// putKey is a, b as a 16-byte key in the transaction's scratch buffer,
// for Put and Delete only: bbolt copies the key it stores, so the hot
// write paths need not allocate one per record. The next putKey call
// overwrites it.
func (tx *Tx) putKey(a, b uint64) []byte {
	binary.BigEndian.PutUint64(tx.keyBuf[:8], a)
	binary.BigEndian.PutUint64(tx.keyBuf[8:], b)
	return tx.keyBuf[:16]
}

// putKey3 is putKey for a 24-byte key.
func (tx *Tx) putKey3(a, b, c uint64) []byte {
	binary.BigEndian.PutUint64(tx.keyBuf[16:], c)
	return tx.putKey(a, b)[:24]
}

// putKey1 is putKey for an 8-byte key.
func (tx *Tx) putKey1(a uint64) []byte {
	binary.BigEndian.PutUint64(tx.keyBuf[:8], a)
	return tx.keyBuf[:8]
}
