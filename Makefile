# aion_wake: PGXS build
#
#   make && make install                 build and install (as root)
#   make installcheck                    every suite, each on a temporary
#                                        instance (run as the postgres user)

EXTENSION = aion_wake
MODULE_big = aion_wake
OBJS = \
	src/aion_wake.o \
	src/args.o \
	src/batch.o \
	src/claim.o \
	src/claim_direct.o \
	src/claim_wait.o \
	src/fence_heap.o \
	src/lease_ledger.o \
	src/limits.o \
	src/listener.o \
	src/monitor.o \
	src/outbox.o \
	src/parked_set.o \
	src/plans.o \
	src/prepared.o \
	src/protocol.o \
	src/pulse_parse.o \
	src/pulse_spend.o \
	src/rate_ledger.o \
	src/rate_window.o \
	src/rates.o \
	src/reoffer.o \
	src/set_views.o \
	src/settings.o \
	src/settle_direct.o \
	src/waiters.o \
	src/worker.o \
	src/worker_slots.o \
	src/xact.o

DATA = sql/aion_wake--1.0.sql sql/aion_wake--1.0--1.1.sql sql/aion_wake--1.1--1.2.sql
PGFILEDESC = "aion_wake - parked outbox rows re-offered when capacity frees"

PG_CPPFLAGS = -Iinclude -I$(libpq_srcdir)
# -Werror is CI's (COPT in .ci/run and test/versions), not a packager's: a newer
# compiler's new warning must not break a distribution build
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
SHLIB_LINK_INTERNAL = $(libpq)

# pg_regress where PGXS looks by default: sql/NAME.sql (beside the install
# and update scripts) and expected/NAME.out; it writes results/,
# regression.diffs, regression.out and log/ at the top, which PGXS's clean
# removes.  The temporary instance stays under test/, apart from TAP's
# tmp_check/: pg_regress removes its instance directory before it starts.
REGRESS = setup protocol outbox security limits monitoring batch batch_books rates rates_attacks priorities claim_direct settle_direct
REGRESS_OPTS = --temp-config=test/aion_wake.conf --temp-instance=test/tmp_check \
	--load-extension=aion_wake

# isolation specs keep a directory of their own: their expected output
# (protocol.out, outbox.out) would collide with pg_regress's in expected/
ISOLATION = protocol outbox topics batch batch_race priorities claim_look settle_look direct_acl
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation \
	--temp-config=test/aion_wake.conf --temp-instance=test/tmp_check_iso \
	--load-extension=aion_wake

TAP_TESTS = 1
# t/ lives under test/; the shared set-up (AionWake::Test) under test/perl
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = test/tmp_check test/tmp_check_iso \
	test/isolation/output_iso test/isolation/results test/isolation/log test/isolation/regression.*

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after PGXS, which empties it: the TAP tests' shared set-up (AionWake::Test)
PROVE_FLAGS += -I test/perl

# PGXS does not track header dependencies: rebuild everything when one changes
$(OBJS): $(wildcard include/*.h)

# ---- make dist: the PGXN distribution (test/package) ------------------------
# aion_wake-X.Y.Z.zip, everything committed at HEAD under aion_wake-X.Y.Z/,
# where X.Y.Z is default_version of aion_wake.control at HEAD read as SemVer
# ('1.0' is 1.0.0), the version META.json carries.  The archive's own
# test/package/check_meta.pl must pass on it first.
# safe.directory: the tree may belong to another user (.ci/run gives it to postgres)
AW_GIT = git -c safe.directory=$(CURDIR)
AW_DIST_VERSION = $(shell $(AW_GIT) show HEAD:$(EXTENSION).control | \
	sed -n "s/^default_version *= *'\([0-9.]*\)'.*/\1/p" | \
	awk -F. '{ printf "%d.%d.%d", $$1, $$2, $$3 }')
AW_DIST = $(EXTENSION)-$(AW_DIST_VERSION)

.PHONY: dist
dist:
	@test -n "$(AW_DIST_VERSION)" || { echo "make dist: no default_version in $(EXTENSION).control at HEAD" >&2; exit 1; }
	@$(AW_GIT) diff --quiet HEAD -- || echo "make dist: uncommitted changes are left out: the zip is made from HEAD" >&2
	@tmp=$$(mktemp -d) && $(AW_GIT) archive --prefix=$(AW_DIST)/ HEAD | tar -x -C $$tmp && \
		perl $$tmp/$(AW_DIST)/test/package/check_meta.pl; rc=$$?; rm -rf $$tmp; exit $$rc
	$(AW_GIT) archive --format=zip --prefix=$(AW_DIST)/ -o $(AW_DIST).zip HEAD
# ---- end of make dist --------------------------------------------------------
