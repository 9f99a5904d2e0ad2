#!/usr/bin/env bash
# Mutation testing of the core logic (README, "Contributing"): one small
# deliberate bug at a time, each run against the tests of its own package
# that execute the mutated line (measured once per package with coverage),
# reporting the bugs no test noticed. Bounded: MUTATE_BUDGET for the whole
# run (mutants not reached by then are reported as skipped).
#
#   scripts/mutate.sh          the files held to the score, every mutant
#                              (MUTATE_SAMPLE > 0: that many per file)
#   scripts/mutate.sh core     every file of store, tree, rubricpool, replay (and replay/export, replay/view),
#                              grpo, batch, batch/batchdb and client, and the
#                              server's rollout handlers (server/rollout.go),
#                              MUTATE_SAMPLE (default 8) per file
#
# MUTATE_WORKERS mutants are tested at once; a sample is spread evenly
# over each file. Extra arguments go to the tool (go run ./tools/mutate -h
# lists them; -json FILE keeps the results for a later -rerun).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-focus}
[ $# -gt 0 ] && shift
budget=${MUTATE_BUDGET:-90m}
workers=${MUTATE_WORKERS:-2}
sample=${MUTATE_SAMPLE:-0}

bin=$(mktemp -d)/mutate
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./tools/mutate

case $mode in
focus)
	"$bin" -workers "$workers" -max-per-file "$sample" -budget "$budget" "$@" \
		store/check.go store/turn.go store/codec.go store/codec_compat.go \
		store/codec_node.go store/codec_group.go store/codec_event.go \
		store/codec_turn.go store/codec_records.go store/turnrule.go \
		grpo/grpo.go tree/advantage.go tree/routing.go replay/whatif.go
	;;
core)
	"$bin" -workers "$workers" -max-per-file "${MUTATE_SAMPLE:-8}" -budget "$budget" "$@" \
		store tree rubricpool replay replay/export replay/view grpo batch batch/batchdb client server/rollout.go
	;;
*)
	echo "usage: scripts/mutate.sh [focus|core] [tool flags]" >&2
	exit 2
	;;
esac
