#!/usr/bin/env bash
# Runs the README's first-screen commands as written, in a fresh folder,
# with the patrdb they install: each command is first looked up verbatim
# in README.md, so the file and this script cannot drift apart. The
# Python snippet and the DuckDB query are taken from the README itself.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
readme="$repo/README.md"
work=$(mktemp -d)
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# said CMD: the README shows CMD at the start of a line of a code block.
said() {
  grep -qF -- "$1" "$readme" || { echo "readme.sh: the README no longer says: $1" >&2; exit 1; }
}
run() {
  said "$1"
  echo "+ $1"
  eval "$1"
}

export GOBIN="$work/bin" PATH="$work/bin:$PATH"
cd "$repo"
run "go install ./cmd/patrdb"
cd "$work"
run "patrdb demo" >"$work/demo.out"
tail -n 3 "$work/demo.out"
run "patrdb runs"

said "patrdb serve"
patrdb serve >"$work/serve.out" 2>&1 &
serve_pid=$!
for _ in $(seq 1 100); do
  grep -q '^serving ' "$work/serve.out" && break
  kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.out"; exit 1; }
  sleep 0.1
done
echo "+ patrdb serve: $(head -n 1 "$work/serve.out")"

# The Python block, as the README has it.
sed -n '/^```python$/,/^```$/p' "$readme" | sed '1d;$d' >"$work/snippet.py"
echo "+ python3 snippet.py"
PYTHONPATH="$repo/clients/python" python3 "$work/snippet.py"

run "patrdb export demo --format parquet --out lake"
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true; serve_pid=""

# The SQL block, through DuckDB (the lake's DuckDB tests link it).
echo "+ the README's DuckDB query"
cd "$repo"
PATRDB_README_LAKE="$work" go test -count=1 -tags duckdb -run 'TestReadmeQuery$' ./lake/
echo "readme.sh: every command ran"
