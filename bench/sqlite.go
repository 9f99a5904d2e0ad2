package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver

	"github.com/patrdb/patrdb/internal/workload"
	"github.com/patrdb/patrdb/model"
)

// sqliteC is the schema a competent engineer would write for the same
// records: groups, nodes (parent index, partial index of the active nodes
// for the frontier), turns keyed by (node, idx) with token arrays packed
// into little-endian blobs, scores, decisions and advantages; foreign keys
// on, so a node with a missing parent is refused as patrdb refuses it.
// WAL, synchronous=FULL (every commit fsyncs), 16 KiB pages like the bbolt
// files, prepared statements, one transaction per interval. It does not
// keep an event log; patrdb does.
type sqliteC struct {
	db    *sql.DB
	path  string
	stmts map[string]*sql.Stmt
}

const sqliteSchema = `
CREATE TABLE groups(
	id INTEGER PRIMARY KEY, step INTEGER NOT NULL, task TEXT NOT NULL, prompt TEXT NOT NULL,
	status TEXT NOT NULL, interval INTEGER NOT NULL DEFAULT 0);
CREATE INDEX groups_step ON groups(step);
CREATE TABLE nodes(
	id INTEGER PRIMARY KEY, grp INTEGER NOT NULL REFERENCES groups(id), parent INTEGER REFERENCES nodes(id),
	fork INTEGER NOT NULL, ordinal INTEGER NOT NULL, base INTEGER NOT NULL, depth INTEGER NOT NULL,
	status TEXT NOT NULL, turns INTEGER NOT NULL DEFAULT 0, reward REAL);
CREATE INDEX nodes_parent ON nodes(parent);
CREATE INDEX nodes_active ON nodes(grp) WHERE status = 'active';
CREATE TABLE turns(
	node INTEGER NOT NULL REFERENCES nodes(id), idx INTEGER NOT NULL,
	action TEXT NOT NULL, action_tokens BLOB, action_logprobs BLOB,
	observation TEXT NOT NULL, observation_tokens BLOB, reward REAL NOT NULL, done INTEGER NOT NULL,
	PRIMARY KEY(node, idx));
CREATE TABLE scores(
	node INTEGER NOT NULL, interval INTEGER NOT NULL, turn INTEGER NOT NULL, value REAL NOT NULL,
	PRIMARY KEY(node, interval)) WITHOUT ROWID;
CREATE TABLE decisions(
	node INTEGER NOT NULL, interval INTEGER NOT NULL, action TEXT NOT NULL, score REAL NOT NULL,
	reference REAL NOT NULL, delta REAL NOT NULL, rule TEXT NOT NULL, children INTEGER NOT NULL,
	PRIMARY KEY(node, interval)) WITHOUT ROWID;
CREATE TABLE advantages(
	step INTEGER NOT NULL, grp INTEGER NOT NULL, leaf INTEGER NOT NULL, outcome REAL NOT NULL,
	total REAL NOT NULL, mean REAL NOT NULL, std REAL NOT NULL, advantage REAL NOT NULL,
	zero_variance INTEGER NOT NULL, PRIMARY KEY(step, grp, leaf)) WITHOUT ROWID;
`

var sqliteStmts = map[string]string{
	"group":    `INSERT INTO groups(id, step, task, prompt, status) VALUES (?, ?, ?, ?, 'open')`,
	"interval": `UPDATE groups SET interval = ? WHERE id = ?`,
	"close":    `UPDATE groups SET status = 'closed' WHERE id = ?`,
	"node": `INSERT INTO nodes(id, grp, parent, fork, ordinal, base, depth, status)
		VALUES (?1, ?2, ?3, ?4, ?5,
			COALESCE((SELECT base + ?4 FROM nodes WHERE id = ?3), 0),
			COALESCE((SELECT depth + 1 FROM nodes WHERE id = ?3), 0), 'active')`,
	"turn": `INSERT OR REPLACE INTO turns(node, idx, action, action_tokens, action_logprobs,
		observation, observation_tokens, reward, done) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
	"turns":    `UPDATE nodes SET turns = max(turns, ?) WHERE id = ?`,
	"status":   `UPDATE nodes SET status = ? WHERE id = ?`,
	"reward":   `UPDATE nodes SET reward = ? WHERE id = ?`,
	"score":    `INSERT OR REPLACE INTO scores(node, interval, turn, value) VALUES (?, ?, ?, ?)`,
	"decision": `INSERT OR REPLACE INTO decisions(node, interval, action, score, reference, delta, rule, children) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
	"adv":      `INSERT OR REPLACE INTO advantages(step, grp, leaf, outcome, total, mean, std, advantage, zero_variance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
}

func (s *sqliteC) name() string { return cSQLite }
func (s *sqliteC) files() []string {
	return []string{s.path, s.path + "-wal", s.path + "-shm"}
}

func (s *sqliteC) open(path string) error {
	if err := removeStore(path); err != nil {
		return err
	}
	// synchronous is per connection, so it goes in the DSN; page_size must
	// precede the switch to WAL, so those two run by hand below.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	s.db, s.path = db, path
	for _, q := range []string{"PRAGMA page_size = 16384", "PRAGMA journal_mode = WAL", sqliteSchema} {
		if _, err := db.Exec(q); err != nil {
			_ = db.Close()
			return fmt.Errorf("%s: %w", strings.Fields(q)[0], err)
		}
	}
	// Check the settings took: a silently ignored pragma would flatter SQLite.
	var mode string
	var sync, page int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		return err
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&page); err != nil {
		return err
	}
	if mode != "wal" || sync != 2 || page != 16384 {
		return fmt.Errorf("sqlite settings not applied: journal_mode=%s synchronous=%d page_size=%d", mode, sync, page)
	}
	s.stmts = map[string]*sql.Stmt{}
	for k, q := range sqliteStmts {
		st, err := db.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", k, err)
		}
		s.stmts[k] = st
	}
	return nil
}

func (s *sqliteC) prepare(txn []workload.Op) (any, error) { return txn, nil }

func (s *sqliteC) apply(prepared any) error {
	txn := prepared.([]workload.Op)
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st := func(k string) *sql.Stmt { return tx.StmtContext(ctx, s.stmts[k]) }
	stmts := map[string]*sql.Stmt{}
	get := func(k string) *sql.Stmt {
		if x, ok := stmts[k]; ok {
			return x
		}
		x := st(k)
		stmts[k] = x
		return x
	}
	for i := range txn {
		op := &txn[i]
		var err error
		switch op.Kind {
		case workload.OpOpenGroup:
			_, err = get("group").Exec(op.Group, op.Step, op.Task, op.Prompt)
		case workload.OpAddNode:
			var parent any
			if op.Parent != 0 {
				parent = op.Parent
			}
			_, err = get("node").Exec(op.Node, op.Group, parent, op.Fork, op.Ordinal)
		case workload.OpTurns:
			ins := get("turn")
			for j := range op.Turns {
				t := &op.Turns[j]
				if _, err = ins.Exec(op.Node, op.From+j, t.Action, packU32(t.ActionTokens), packF32(t.ActionLogprobs),
					t.Observation, packU32(t.ObservationTokens), t.Reward, t.Done); err != nil {
					break
				}
			}
			if err == nil {
				_, err = get("turns").Exec(op.From+len(op.Turns), op.Node)
			}
		case workload.OpStatus:
			_, err = get("status").Exec(string(op.Status), op.Node)
		case workload.OpReward:
			_, err = get("reward").Exec(op.Value, op.Node)
		case workload.OpScore:
			_, err = get("score").Exec(op.Node, op.Score.Interval, op.Score.Turn, op.Score.Value)
		case workload.OpRoute:
			d := op.Decision
			_, err = get("decision").Exec(op.Node, d.Interval, d.Action, d.Score, d.Reference, d.Delta, d.Rule, d.Children)
			if err == nil && d.Action != model.ActionSurvive {
				status := model.NodeExpanded
				if d.Action == model.ActionPrune {
					status = model.NodePruned
				}
				_, err = get("status").Exec(string(status), op.Node)
			}
		case workload.OpInterval:
			_, err = get("interval").Exec(op.Interval, op.Group)
		case workload.OpAdvantage:
			a := op.Adv
			_, err = get("adv").Exec(a.Step, a.Group, a.Leaf, a.Outcome, a.Total, a.Mean, a.Std, a.Advantage, a.ZeroVariance)
		case workload.OpCloseGroup:
			_, err = get("close").Exec(op.Group)
		}
		if err != nil {
			return fmt.Errorf("op %d (kind %d): %w", i, op.Kind, err)
		}
	}
	return tx.Commit()
}

func (s *sqliteC) close() error {
	if s.db == nil {
		return nil
	}
	for _, st := range s.stmts {
		_ = st.Close()
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// packU32 and packF32 pack token arrays little-endian, as patrdb does.
func packU32(xs []uint32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], x)
	}
	return out
}

func packF32(xs []float32) []byte {
	out := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
