#!/usr/bin/env bash
#
# test/model/run.sh -- check the spin model of how aion_wake parks rows and
# spends pulses (test/model/aion_wake.pml; README.md next to it says what
# is modelled and what each check means).
#
# Checks, each an exhaustive search by spin's verifier (safety: asserts,
# the two G2 monitors, invalid end states):
#   1. the model of the code as it is (commit 9287b99, with the fixes of
#      F1-F7, F9, F10)                                   -> G2a, G2b, G3 and no
#                                                  deadlock must hold
#   2. the same, park()/fail() without a lease_token -> must hold
#   3. the same with a claimer blocked on the topic, to which a committed
#      pulse() is handed (-DWAITER, one pulse, 2 + 2 calls) -> must hold
#   4. mutants M1..M7 (on top of 1; M5 and M6 without a lease_token, where
#      F7 and F6 were found; M7 on top of 3) -> each must be rejected, by
#                                                  the property it breaks
#   5. the direct hand-off of issue 17 (README: "The direct hand-off"): the
#      claimer of 3 and complete()/fail() with next_rows (-DNEXT_ROWS)
#      claim a parked row straight from its fence; they must hold (the
#      code has the fixes of F9 and F10), the code before each of those
#      fixes (-DFINDING_F9, -DFINDING_F10) must be rejected, and mutants
#      M8, M9 must be rejected; with --full, F11 (not fixed in the code,
#      README.md) must be reproduced and its proposed fix must hold
# With --full also: two rows and a two-slot pulse (about 20 s, 700 MB), and
# settle-and-take over two rows, finding F11 and its fix without a
# lease_token (about 70 s more, 1 GB).
#
# A failing check prints the shortest counterexample, condensed to its key
# steps.  Prints "model: N passed, M failed" and exits non-zero unless every
# check holds and every mutant is rejected.  Installs nothing: it needs spin
# (Debian package "spin") and gcc.
#
# Environment: MODEL_FLAGS adds -D flags to every check; KEEP=1 keeps the
# work directory.
#
set -u
cd "$(dirname "$0")" || exit 1
here=$(pwd)
model=aion_wake.pml

full=false
for arg in "$@"; do
	case $arg in
	--full) full=true ;;
	*) echo "usage: $0 [--full]" >&2; exit 2 ;;
	esac
done

if ! command -v spin >/dev/null 2>&1; then
	echo "run.sh: spin is not installed (Debian: apt-get install -y spin)" >&2
	exit 1
fi
if ! command -v gcc >/dev/null 2>&1; then
	echo "run.sh: gcc is not installed" >&2
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/aion_wake_model.XXXXXX")
if [ "${KEEP:-}" = 1 ]; then
	echo "work directory: $work"
else
	trap 'rm -rf "$work"' EXIT
fi

BASE="${MODEL_FLAGS:-}"
passed=0
failed=0

# the property an assertion of the model belongs to, from pan's message
property_of() {
	case $1 in
	*g_live*) echo "G2a (a slot vanished)" ;;
	*credit_until*) echo "G2b (a slot stranded beside a parked row)" ;;
	*c_mask*) echo "G3 (took an entry whose fence is not committed)" ;;
	*tk_ver*) echo "G3 (the re-offer moved a fence it did not park)" ;;
	*"invalid end state"*) echo "deadlock (invalid end state)" ;;
	*) echo "unknown: $1" ;;
	esac
}

# verify NAME FLAGS...: build and run the verifier in $work/NAME; sets
# $errors, $states, $violation; prints nothing
verify() {
	local name=$1
	shift
	local dir=$work/$name
	mkdir -p "$dir"
	cp "$here/$model" "$dir/"
	errors=""
	states=""
	violation=""
	if ! (cd "$dir" && spin "$@" -a $model >spin.out 2>&1); then
		violation="spin -a failed: $(head -3 "$dir/spin.out")"
		errors=build
		return
	fi
	if ! (cd "$dir" && gcc -O2 -w -DSAFETY -DCOLLAPSE -DMEMLIM=6000 -o pan pan.c >gcc.out 2>&1); then
		violation="gcc failed: $(head -3 "$dir/gcc.out")"
		errors=build
		return
	fi
	(cd "$dir" && ./pan -m100000 >pan.out 2>&1)
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.out" | tail -1)
	states=$(awk '/states, stored/ { print $1 }' "$dir/pan.out" | tail -1)
	violation=$(grep -m1 -E '^pan:[0-9]*: |^pan: ' "$dir/pan.out" | sed 's/ *(at depth [0-9]*)//')
	if [ -z "$errors" ]; then
		errors=incomplete
	elif grep -q -E 'max search depth too small|Search not completed|out of memory' "$dir/pan.out" &&
		[ "$errors" = 0 ]; then
		errors=incomplete
		violation="search incomplete: $(grep -m1 -E 'max search depth too small|Search not completed|out of memory' "$dir/pan.out")"
	fi
}

# trail NAME FLAGS...: the shortest counterexample (breadth-first), condensed
trail() {
	local name=$1
	shift
	local dir=$work/$name
	(cd "$dir" && rm -f ./*.trail &&
		gcc -O2 -w -DSAFETY -DBFS -o panb pan.c >/dev/null 2>&1 &&
		./panb >panb.out 2>&1 &&
		spin "$@" -t $model 2>&1) |
		sed -n 's/^ *MSC: /      /p; s/^spin: text of failed assertion: .*/      ** the property is violated here/p' |
		cut -c1-160
}

check_model() {
	local label=$1
	shift
	local name
	name=$(echo "$label" | tr -c 'A-Za-z0-9\n' _)
	verify "$name" "$@"
	if [ "$errors" = 0 ]; then
		echo "model: $label: 4 properties hold (G2a, G2b, G3, no deadlock; $states states)"
		passed=$((passed + 1))
	else
		echo "model: $label: FAILED -- $(property_of "$violation")"
		if [ "$errors" != build ] && [ "$errors" != incomplete ]; then
			echo "    shortest counterexample (spin -t, condensed):"
			trail "$name" "$@"
		else
			echo "    $violation"
		fi
		failed=$((failed + 1))
	fi
}

check_mutant() {
	local m=$1 want=$2
	shift 2
	verify "mutant_$m" "$@" "-DMUTANT_$m"
	if [ "$errors" = build ] || [ "$errors" = incomplete ]; then
		echo "mutant $m: NOT rejected -- $violation"
		failed=$((failed + 1))
	elif [ "$errors" = 0 ]; then
		echo "mutant $m: NOT rejected (no counterexample in $states states)"
		failed=$((failed + 1))
	elif [[ $(property_of "$violation") != $want* ]]; then
		echo "mutant $m: rejected, but by $(property_of "$violation"), not $want"
		failed=$((failed + 1))
	else
		echo "mutant $m: rejected (counterexample found: $(property_of "$violation"))"
		passed=$((passed + 1))
	fi
}

# check_finding F WANT FLAGS...: a finding of the model: the code before
# its fix (-DFINDING_F...), or as it is for one not fixed yet, must still
# show its counterexample
check_finding() {
	local f=$1 want=$2
	shift 2
	verify "finding_$f" "$@"
	if [ "$errors" = 0 ] || [ "$errors" = build ] || [ "$errors" = incomplete ]; then
		echo "finding $f: NOT reproduced (${violation:-no counterexample in $states states}): fixed? see README.md"
		failed=$((failed + 1))
	elif [[ $(property_of "$violation") != $want* ]]; then
		echo "finding $f: reproduced, but by $(property_of "$violation"), not $want"
		failed=$((failed + 1))
	else
		echo "finding $f (the code without its fix): reproduced ($(property_of "$violation"))"
		passed=$((passed + 1))
	fi
}

start=$(date +%s)
echo "spin: $(spin -V 2>&1 | head -1)"

# shellcheck disable=SC2086
{
	check_model "code" $BASE
	check_model "code, no lease_token" $BASE -DNULL_TOKEN -DNPULSE=1
	check_model "code, a blocked claimer (WAITER)" $BASE -DWAITER -DNPULSE=1 -DMAXOPS1=2
	check_model "code, settle-and-take (NEXT_ROWS)" $BASE -DNEXT_ROWS
	check_mutant M1 G3 $BASE
	check_mutant M2 G3 $BASE
	check_mutant M3 G2a $BASE
	check_mutant M4 G2b $BASE
	check_mutant M5 G2b $BASE -DNULL_TOKEN -DNPULSE=1
	check_mutant M6 G2b $BASE -DNULL_TOKEN -DNPULSE=1
	check_mutant M7 G2b $BASE -DWAITER -DNPULSE=1 -DMAXOPS1=2
	check_mutant M8 G3 $BASE -DWAITER -DNPULSE=1 -DMAXOPS1=2
	check_mutant M9 G3 $BASE -DNEXT_ROWS
	check_finding F9 G2b $BASE -DWAITER -DNPULSE=1 -DMAXOPS1=2 -DFINDING_F9
	check_finding F10 G2b $BASE -DNEXT_ROWS -DFINDING_F10
	if $full; then
		check_model "code, 2 rows, 2-slot pulse" $BASE -DNR=2 -DNPULSE=1 -DKSLOTS=2 -DMAXOPS1=2 -DMAXOPS2=2
		check_model "code, settle-and-take, 2 rows" $BASE -DNR=2 -DNEXT_ROWS -DNPULSE=1 -DMAXOPS1=2 -DMAXOPS2=2
		check_finding F11 G2b $BASE -DNEXT_ROWS -DNULL_TOKEN -DNPULSE=1 -DTMAX=1
		check_model "code + F11's proposed fix, settle-and-take, no lease_token" $BASE -DNEXT_ROWS -DFIX_F11 -DNULL_TOKEN -DNPULSE=1 -DTMAX=1
	fi
}

echo "model: $passed passed, $failed failed ($(($(date +%s) - start)) s)"
[ "$failed" = 0 ]
