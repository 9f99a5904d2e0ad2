// Package sourcewire is the byte format of a batch.Source: what a step's
// training batch is built from, sent by a server to a client that builds
// the batch itself with batch.Assemble. A token that several rows share
// travels once, and none of the per-token arrays that follow from the
// turns (mask, positions, versions, advantages, coefficients) travels at
// all: on bench/batchbench's LLM-shaped step the source is 12.4 MB, the
// rows batch it becomes 225 MB (docs/json.md, "The batch source").
//
// Every number is little-endian; every table starts 8-byte aligned:
//
//	offset  bytes
//	0       8      magic "PATRDBSW"
//	8       4      version, 1
//	12      4      r: bytes of the run id
//	16      8      step
//	24      4×6    groups, open groups, leaves, path segments (all
//	               leaves' together), nodes, turns
//	48      8      data: bytes of the data part
//	56      r      the run id, then zeros to a multiple of 8
//	then the tables, one record per item:
//	  groups    16 B   id u64, prompt tokens u32, zero u32
//	  open       8 B   id u64
//	  leaves    40 B   id u64, group u32 (index in groups), row status u8
//	                   (batch.StatusCode), 3 zero bytes, reward f64,
//	                   advantage f64, path segments u32, zero u32
//	  segments  16 B   node u64, turns u64: leaf after leaf, each
//	                   leaf's path root first
//	  nodes     16 B   node u64, turns u64: ascending node ids
//	  turns     32 B   action tokens u32, logprobs u32 (0 or the action
//	                   tokens), observation tokens u32, zero u32,
//	                   reward f64, policy version u64: node after node
//	then the data: every group's prompt token ids (u32), then every turn's
//	action token ids (u32), logprobs (float32 bits) and observation token
//	ids (u32), in table order; the body ends there.
//
// Decode checks the framing — the magic and version, every count against
// the bytes that hold it, the data's length against the tables, nothing
// after it — and returns ErrFormat; batch.Assemble checks that what the
// tables say holds together (batch.ErrSource) before it builds anything.
package sourcewire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/patrdb/patrdb/batch"
	"github.com/patrdb/patrdb/model"
)

// MediaType is the Content-Type of a batch source, and what a request's
// Accept names to get one.
const MediaType = "application/x-patrdb-batch-source"

// ErrFormat: bytes that are not a batch source of a version this package
// reads (a wrong magic, a count that runs past the body, bytes left over).
var ErrFormat = errors.New("sourcewire: not a batch source")

const (
	magic   = "PATRDBSW"
	version = 1

	headLen    = 56
	groupLen   = 16
	openLen    = 8
	leafLen    = 40
	segLen     = 16
	nodeLen    = 16
	turnLen    = 32
	tableCount = 6
)

var le = binary.LittleEndian

// Append appends src in the wire format to dst and returns the result. It
// copies every array, so the result outlives a transaction src aliases.
func Append(dst []byte, src *batch.Source) []byte {
	var segs, words int
	for _, l := range src.Leaves {
		segs += len(l.Path)
	}
	for _, g := range src.Groups {
		words += len(g.PromptTokens)
	}
	for _, t := range src.Turns {
		words += (len(t.ActionTokens) + len(t.ActionLogprobs) + len(t.ObservationTokens)) / 4
	}
	size := headLen + pad8(len(src.Run)) + groupLen*len(src.Groups) + openLen*len(src.Open) + leafLen*len(src.Leaves) +
		segLen*segs + nodeLen*len(src.Nodes) + turnLen*len(src.Turns) + 4*words
	out := append(dst, make([]byte, size)...)
	w := writer{b: out[len(dst):]}
	w.bytes([]byte(magic))
	w.u32(version)
	w.u32(uint32(len(src.Run)))
	w.u64(src.Step)
	for _, n := range []int{len(src.Groups), len(src.Open), len(src.Leaves), segs, len(src.Nodes), len(src.Turns)} {
		w.u32(uint32(n))
	}
	w.u64(uint64(4 * words))
	w.bytes([]byte(src.Run))
	w.at = pad8(w.at)
	for _, g := range src.Groups {
		w.u64(g.ID)
		w.u32(uint32(len(g.PromptTokens)))
		w.u32(0)
	}
	for _, id := range src.Open {
		w.u64(id)
	}
	for _, l := range src.Leaves {
		w.u64(l.ID)
		w.u32(uint32(l.Group))
		w.b[w.at] = batch.StatusCode(l.Status)
		w.at += 4
		w.u64(math.Float64bits(l.Reward))
		w.u64(math.Float64bits(l.Advantage))
		w.u32(uint32(len(l.Path)))
		w.u32(0)
	}
	for _, l := range src.Leaves {
		for _, s := range l.Path {
			w.u64(s.Node)
			w.u64(uint64(s.Count))
		}
	}
	for _, n := range src.Nodes {
		w.u64(n.Node)
		w.u64(uint64(n.Count))
	}
	for _, t := range src.Turns {
		w.u32(uint32(len(t.ActionTokens) / 4))
		w.u32(uint32(len(t.ActionLogprobs) / 4))
		w.u32(uint32(len(t.ObservationTokens) / 4))
		w.u32(0)
		w.u64(math.Float64bits(t.Reward))
		w.u64(t.PolicyVersion)
	}
	for _, g := range src.Groups {
		w.words(g.PromptTokens)
	}
	for _, t := range src.Turns {
		w.bytes(t.ActionTokens)
		w.bytes(t.ActionLogprobs)
		w.bytes(t.ObservationTokens)
	}
	return out
}

// Decode reads a batch source. Its turns' arrays are views of body, not
// copies: body must not change while the source is in use.
func Decode(body []byte) (*batch.Source, error) {
	r := reader{b: body}
	if len(body) < headLen || string(body[:8]) != magic {
		return nil, fmt.Errorf("%w: no %q magic at its start", ErrFormat, magic)
	}
	r.at = 8
	if v := r.u32(); v != version {
		return nil, fmt.Errorf("%w: version %d; this build reads version %d", ErrFormat, v, version)
	}
	runLen := uint64(r.u32())
	src := &batch.Source{Step: r.u64()}
	var n [tableCount]uint64
	for i := range n {
		n[i] = uint64(r.u32())
	}
	dataLen := r.u64()
	groups, open, leaves, segs, nodes, turns := n[0], n[1], n[2], n[3], n[4], n[5]
	tables := uint64(pad8(int(runLen))) + groupLen*groups + openLen*open + leafLen*leaves + segLen*segs + nodeLen*nodes + turnLen*turns
	if have := uint64(len(body) - headLen); tables > have || dataLen != have-tables {
		return nil, fmt.Errorf("%w: %d bytes after the header, for %d of tables and %d of data", ErrFormat, have, tables, dataLen)
	}
	src.Run = string(body[r.at : r.at+int(runLen)])
	r.at += pad8(int(runLen))
	data := reader{b: body[len(body)-int(dataLen):]}
	words := func(what string, count uint32) ([]byte, error) {
		if uint64(count)*4 > uint64(len(data.b)-data.at) {
			return nil, fmt.Errorf("%w: %s of %d words runs past the data", ErrFormat, what, count)
		}
		return data.take(int(count) * 4), nil
	}
	src.Groups = make([]batch.SourceGroup, groups)
	promptLen := make([]uint32, groups)
	for i := range src.Groups {
		src.Groups[i].ID = r.u64()
		promptLen[i] = r.u32()
		r.at += 4
	}
	src.Open = make([]uint64, open)
	for i := range src.Open {
		src.Open[i] = r.u64()
	}
	src.Leaves = make([]batch.SourceLeaf, leaves)
	pathLen := make([]uint32, leaves)
	var pathSum uint64
	for i := range src.Leaves {
		l := &src.Leaves[i]
		l.ID = r.u64()
		l.Group = int(r.u32())
		status, ok := statusOf(r.b[r.at])
		if !ok {
			return nil, fmt.Errorf("%w: leaf %d has row status %d", ErrFormat, l.ID, r.b[r.at])
		}
		l.Status = status
		r.at += 4
		l.Reward = math.Float64frombits(r.u64())
		l.Advantage = math.Float64frombits(r.u64())
		pathLen[i] = r.u32()
		pathSum += uint64(pathLen[i])
		r.at += 4
	}
	if pathSum != segs {
		return nil, fmt.Errorf("%w: leaves' paths of %d segments, %d listed", ErrFormat, pathSum, segs)
	}
	all := make([]model.Segment, segs+nodes)
	for i := range all {
		node, count := r.u64(), r.u64()
		if count > math.MaxInt32 {
			return nil, fmt.Errorf("%w: a segment of node %d claims %d turns", ErrFormat, node, count)
		}
		all[i] = model.Segment{Node: node, Count: int(count)}
	}
	for i := range src.Leaves {
		src.Leaves[i].Path, all = all[:pathLen[i]:pathLen[i]], all[pathLen[i]:]
	}
	src.Nodes = all
	src.Turns = make([]batch.SourceTurn, turns)
	type counts struct{ action, logprobs, obs uint32 }
	turnWords := make([]counts, turns)
	for i := range src.Turns {
		turnWords[i] = counts{r.u32(), r.u32(), r.u32()}
		r.at += 4
		src.Turns[i].Reward = math.Float64frombits(r.u64())
		src.Turns[i].PolicyVersion = r.u64()
	}
	for i := range src.Groups {
		b, err := words("a prompt", promptLen[i])
		if err != nil {
			return nil, err
		}
		src.Groups[i].PromptTokens, _ = model.Words(b) // whole words: words() cut 4 bytes each
	}
	for i, c := range turnWords {
		t := &src.Turns[i]
		var err error
		if t.ActionTokens, err = words("action tokens", c.action); err == nil {
			if t.ActionLogprobs, err = words("logprobs", c.logprobs); err == nil {
				t.ObservationTokens, err = words("observation tokens", c.obs)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if data.at != len(data.b) {
		return nil, fmt.Errorf("%w: %d bytes after the last turn", ErrFormat, len(data.b)-data.at)
	}
	return src, nil
}

// statusOf is the leaf status of a row status code.
func statusOf(code uint8) (model.NodeStatus, bool) {
	for _, s := range []model.NodeStatus{model.NodeCompleted, model.NodePruned, model.NodeTruncated, model.NodeFailed} {
		if batch.StatusCode(s) == code {
			return s, true
		}
	}
	return "", false
}

func pad8(n int) int { return (n + 7) &^ 7 }

type writer struct {
	b  []byte
	at int
}

func (w *writer) u32(x uint32)   { le.PutUint32(w.b[w.at:], x); w.at += 4 }
func (w *writer) u64(x uint64)   { le.PutUint64(w.b[w.at:], x); w.at += 8 }
func (w *writer) bytes(p []byte) { w.at += copy(w.b[w.at:], p) }

// words writes ids as model.AppendWords packs them, into the space
// already made for them.
func (w *writer) words(ids []uint32) { w.at += len(model.AppendWords(w.b[w.at:w.at], ids)) }

type reader struct {
	b  []byte
	at int
}

func (r *reader) u32() uint32 { x := le.Uint32(r.b[r.at:]); r.at += 4; return x }
func (r *reader) u64() uint64 { x := le.Uint64(r.b[r.at:]); r.at += 8; return x }

// take is the next n bytes, capped so that an append to them cannot
// reach the bytes after.
func (r *reader) take(n int) []byte { p := r.b[r.at : r.at+n : r.at+n]; r.at += n; return p }
