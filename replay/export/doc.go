// Package export writes a run's records as files for tools outside patrdb:
// JSONL (one line per leaf with its whole path materialised, and one per
// node) and RL rows (package batch's rows layout, as JSONL and Parquet).
//
// Export writes Hive-style folders <out>/run=<id>/step=<n>/ into a
// temporary folder beside the target and renames it into place at the end,
// so a failed or interrupted export leaves nothing behind; it checks the
// whole run first, in the same read transaction, so a damaged run exports
// nothing. It only reads the store. The Parquet lake, which follows a live
// file step by step, is package lake's; it reads groups through ReadGroup.
package export
