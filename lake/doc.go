// Package lake keeps a Parquet lake of patrdb runs, in a folder or an
// S3-compatible bucket, that DuckDB, pandas (pyarrow), Spark and Trino read
// without patrdb: one folder per table (Tables), partitioned Hive-style,
// <table>/run=<name>/step=<n>/part-<k>.parquet, columns as docs/lake.md
// lists them. A run's file is the hot tier of one run; the lake is the
// durable, shared one.
//
// # Following a run
//
// Lake.Export adds what the lake lacks of a run: each step once the run has
// checkpointed it, with its part of the event log (partition.go); a
// finished or failed run whole. Lake.Follow does it again and again while a
// trainer or patrdb serve writes the file, and with KeepSteps drops from
// the file the steps the lake holds (Lake.Retain, store.RunTx.DropSteps),
// so the file stops growing. Lake.Restore rebuilds a run from the lake into
// a file (store.DB.LoadRun) that a trainer resumes.
//
// # What a reader sees
//
// Every file appears whole (a rename into place in a folder, one upload to
// a bucket) under a name that depends only on the run, the table, the step
// and the part: an export cut short and done again writes the same bytes
// under the same names, never a second copy. The files of a step appear one
// after the other; the run's manifest, _patrdb/runs/<name>.json, written
// after them, counts the steps that are all there.
//
// # Concurrency and lifetime
//
// A Lake is safe for concurrent use and holds no open resources. An export
// holds the run name's lease in the lake (a lock file in a folder, which
// the system drops when the process dies; a conditionally written object
// in a bucket, renewed while held and taken over once its holder is gone)
// for as long as it runs, and a Follower for as long as it follows: a
// second exporter of the same name is ErrBusy. Exports of different runs
// into one lake run side by side. A Follower's methods may be called from
// any goroutine; Close stops it after a last export and gives the leases
// back. Every export reads one snapshot of the file (DB.View), so writers
// go on meanwhile.
package lake
