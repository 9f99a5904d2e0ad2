#!/usr/bin/env bash
# Mutation testing of the core logic (README, "Contributing"): one small
# deliberate bug at a time, each run against the tests of its own package,
# reporting the bugs no test noticed. Bounded: MUTATE_BUDGET for the whole
# run (mutants not reached by then are reported as skipped).
#
#   scripts/mutate.sh          the files held to the score, every mutant
#   scripts/mutate.sh core     every file of store, tree, rubricpool and
#                              replay, MUTATE_SAMPLE mutants per file
#
# MUTATE_WORKERS mutants are tested at once; MUTATE_SAMPLE > 0 tests that
# many per file, spread evenly over it. Extra arguments go to the tool
# (go run ./tools/mutate -h lists them).
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
	# Each file with the tests that exercise it (go test -run): the
	# package's other tests only slow each mutant down, and a narrower
	# set can only lower the score.
	exec "$bin" -workers "$workers" -max-per-file "$sample" -budget "$budget" "$@" \
		'store/check.go@Check|Corrupt|FuzzFile' \
		'store/turn.go@Turn|Trajector|RoundTrip|Encoded|Rewrites|Msgpack|BadInput|FuzzDecodeTurn' \
		'store/codec.go@Fits|Decode|Encode|RoundTrip|Msgpack|BadInput|Corrupt|Check|Pack|Clone|Frame|Canonical|FuzzDecode' \
		'tree/advantage.go@GRPO|Advantage' \
		'tree/routing.go@Route' \
		'replay/whatif.go@WhatIf'
	;;
core)
	exec "$bin" -workers "$workers" -max-per-file "${MUTATE_SAMPLE:-8}" -budget "$budget" "$@" \
		store tree rubricpool replay
	;;
*)
	echo "usage: scripts/mutate.sh [focus|core] [tool flags]" >&2
	exit 2
	;;
esac
