#!/usr/bin/env bash
#
# test/fuzz/run.sh
#	  Fuzz the capacity pulse parser (src/pulse_parse.c): the NOTIFY
#	  payloads it reads come from any session, so they are untrusted input.
#
#	  Usage: bash test/fuzz/run.sh [SECONDS]   (default 30)
#
#	  Builds test/fuzz/fuzz_pulse_parse.c with
#	  clang -fsanitize=fuzzer,address,undefined and runs it for SECONDS
#	  seconds on a seed corpus created in a temporary directory.
#
#	  Exits non-zero if clang is missing or the fuzzer finds a crash (the
#	  crashing input is kept and its path printed).  The unit tests of the
#	  pure parts are test/unit/run.sh.
#
# Copyright (c) 2026, aion_wake authors
#
set -euo pipefail

secs="${1:-30}"
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
	echo "usage: $0 [SECONDS]  (positive integer, default 30)" >&2
	exit 2
fi

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd -- "$script_dir/../.." && pwd)"
src="$root/src/pulse_parse.c"
inc="$root/include"

work="$(mktemp -d "${TMPDIR:-/tmp}/aw_fuzz.XXXXXX")"
keep_work=0
cleanup()
{
	if [[ $keep_work -eq 0 ]]; then
		rm -rf -- "$work"
	fi
}
trap cleanup EXIT

if ! command -v clang >/dev/null 2>&1; then
	echo "fuzz: clang not found; install it (apt-get install -y clang) to run the fuzzer" >&2
	exit 1
fi

clang -g -O1 -Wall -Wextra -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-I "$inc" -o "$work/fuzz_pulse_parse" \
	"$script_dir/fuzz_pulse_parse.c" "$src"

corpus="$work/corpus"
artifacts="$work/artifacts"
mkdir -p "$corpus" "$artifacts"
n=0
seed()
{
	n=$((n + 1))
	printf '%b' "$1" > "$corpus/seed_$n"
}
seed 'default'
seed 'default:3'
seed 'a.b-c_D9:1000000'
seed 't:0007'
seed 't:1000001'
seed 't:1:2'
seed 't:'
seed ':5'
seed 't:+5'
seed 't: 5'
seed 'a b'
seed '\xc3\xbc'
seed 'a\x00b:3'
seed "$(printf 'x%.0s' $(seq 1 63)):42"
seed "$(printf 'y%.0s' $(seq 1 64))"
seed "t:$(printf '0%.0s' $(seq 1 190))5"

cat > "$work/pulse.dict" <<'DICT'
":"
"0"
"000000"
"1000000"
"1000001"
"9999999"
"-"
"."
"_"
"\x00"
DICT

log="$work/fuzz.log"
start=$(date +%s)
set +e
ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}" \
UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
	"$work/fuzz_pulse_parse" \
	-max_total_time="$secs" -print_final_stats=1 \
	-max_len=512 -timeout=10 \
	-dict="$work/pulse.dict" \
	-artifact_prefix="$artifacts/" \
	"$corpus" > "$log" 2>&1
rc=$?
set -e
elapsed=$(( $(date +%s) - start ))

runs="$(sed -n 's/^stat::number_of_executed_units:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$log" | tail -n 1)"
runs="${runs:-0}"

crashes=$(find "$artifacts" -type f | wc -l)
if [[ $rc -ne 0 && $crashes -eq 0 ]]; then
	crashes=1
fi

echo "fuzz: $runs runs in $elapsed s, $crashes crashes"

if [[ $rc -ne 0 || $crashes -ne 0 ]]; then
	keep_work=1
	echo "fuzz: FAILED (exit $rc); last lines of $log:" >&2
	tail -n 40 "$log" >&2
	if [[ $(find "$artifacts" -type f | wc -l) -gt 0 ]]; then
		echo "fuzz: crashing inputs kept in $artifacts" >&2
	fi
	exit 1
fi
if [[ "$runs" -eq 0 ]]; then
	keep_work=1
	echo "fuzz: FAILED: no runs recorded; see $log" >&2
	exit 1
fi
