#!/usr/bin/env bash
#
# test/unit/run.sh
#	  Unit-test the pure parts of aion_wake, the files that include no
#	  PostgreSQL header and so compile standalone: the capacity pulse parser
#	  (src/pulse_parse.c), the fence heap (src/fence_heap.c) and the log
#	  of a rated topic's recent starts (src/rate_window.c).
#
#	  Usage: bash test/unit/run.sh
#
#	  Builds each test/unit/unit_*.c against its source file with
#	  cc -std=c99 -Wall -Wextra -Werror and runs it; each prints its own
#	  summary.  A test that fails to build or fails its checks does not
#	  stop the others.  Ends with "unit: N passed, N failed" (one count per
#	  test program) and exits non-zero if any failed.
#
#	  Fuzzing of the parser is test/fuzz/run.sh.
#
# Copyright (c) 2026, aion_wake authors
#
set -euo pipefail

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd -- "$script_dir/../.." && pwd)"
inc="$root/include"

work="$(mktemp -d "${TMPDIR:-/tmp}/aw_unit.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT

passed=0
failed=0

# unit NAME SOURCE: build test/unit/unit_NAME.c with src/SOURCE and run it
unit()
{
	local name=$1 source=$2
	if ! cc -std=c99 -Wall -Wextra -Werror -O1 -I "$inc" \
		-o "$work/unit_$name" \
		"$script_dir/unit_$name.c" "$root/src/$source"; then
		echo "unit_$name: FAILED to build" >&2
		failed=$((failed + 1))
		return
	fi
	if "$work/unit_$name"; then
		passed=$((passed + 1))
	else
		echo "unit_$name: FAILED (exit $?)" >&2
		failed=$((failed + 1))
	fi
}

unit pulse_parse pulse_parse.c
unit fence_heap fence_heap.c
unit rate_window rate_window.c

echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
