package lake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/patrdb/patrdb/model"
)

// metaDir holds the lake's own records; readers of the tables skip folders
// whose names start with "_" (Hive's convention, and Spark's, pyarrow's
// and Trino's), and a table glob never reaches it.
const metaDir = "_patrdb"

// manifestFormat is the manifest's version: a newer one is refused.
const manifestFormat = 1

// Source identifies the file's run an export came from: its id there and
// the time it was created, which a copy, a backup, a compacted file or a
// restore keep, and another run under the same id does not share.
type Source struct {
	Run       string `json:"run"`
	CreatedAt int64  `json:"created_at"` // Unix ns
}

func sourceOf(run model.Run) Source { return Source{Run: run.ID, CreatedAt: run.CreatedAt} }

// Manifest is a run's record in the lake (_patrdb/runs/<name>.json): where
// it came from and how far it is exported. It is written after the files
// it counts, so it never claims a step whose files are not all there: a
// reader that wants only complete steps reads steps up to Step.
type Manifest struct {
	Format int    `json:"format"`
	Run    string `json:"run"` // the run's name in the lake
	Source Source `json:"source"`
	// Step: the steps up to it are in the lake whole (their groups, nodes,
	// turns, advantages and checkpoints, and their part of the log).
	Step uint64 `json:"step"`
	// Seq is the last event in the lake's log; SeqTime its time, which a
	// later export compares with the file's event to know it is the same
	// log and not a copy that went another way.
	Seq     uint64 `json:"seq"`
	SeqTime int64  `json:"seq_created_at"`
	// Cursor is the log's partition state after Seq (partition.go).
	Cursor cursor `json:"cursor"`
	// Status is the run's status at the last export.
	Status model.RunStatus `json:"status"`
	// Tail, when not nil, says the run was exported whole (it was finished
	// or failed): beyond Step and Seq the lake holds what followed its
	// last checkpoint, as it stood, up to event Tail.Seq and step
	// Tail.Step. If the run goes on, the next export rewrites that tail.
	Tail *Tail `json:"tail,omitempty"`
	// Replacing says a replacement of the run is under way: the next
	// export removes whatever the lake holds under the name first.
	Replacing bool   `json:"replacing,omitempty"`
	UpdatedAt int64  `json:"updated_at"`
	Writer    string `json:"writer"`
}

// Tail is how far past its last checkpoint a finished or failed run is
// in the lake.
type Tail struct {
	Step    uint64 `json:"step"`
	Seq     uint64 `json:"seq"`
	SeqTime int64  `json:"seq_created_at"`
}

func manifestKey(name string) string { return path.Join(metaDir, "runs", name+".json") }

// readManifest returns the run's manifest, nil when it has none.
func (l *Lake) readManifest(ctx context.Context, name string) (*Manifest, error) {
	b, err := l.obj.get(ctx, manifestKey(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the manifest of run %s in %s: %w", name, l, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: the manifest of run %s in %s does not read: %v", ErrLayout, name, l, err)
	}
	if m.Format > manifestFormat {
		return nil, fmt.Errorf("%w: the manifest of run %s in %s is format %d; this build reads %d", ErrLayout, name, l, m.Format, manifestFormat)
	}
	return &m, nil
}

func (l *Lake) writeManifest(ctx context.Context, m *Manifest) error {
	m.Format, m.UpdatedAt, m.Writer = manifestFormat, time.Now().UnixNano(), writer
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return l.obj.putBytes(ctx, manifestKey(m.Run), append(b, '\n'))
}

// Manifest returns the manifest of run name, or ErrNoRun.
func (l *Lake) Manifest(ctx context.Context, name string) (*Manifest, error) {
	m, err := l.readManifest(ctx, name)
	if err == nil && m == nil {
		err = fmt.Errorf("%w: %s in %s", ErrNoRun, name, l)
	}
	return m, err
}

// writer names the program in the manifest and the Parquet files.
const writer = "patrdb"
