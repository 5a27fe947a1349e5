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
	src/fence_heap.o \
	src/outbox.o \
	src/parked_set.o \
	src/plans.o \
	src/protocol.o \
	src/pulse_parse.o \
	src/reoffer.o \
	src/settings.o \
	src/waiters.o \
	src/worker.o \
	src/worker_slots.o \
	src/xact.o

DATA = sql/aion_wake--1.0.sql
PGFILEDESC = "aion_wake - parked outbox rows re-offered when capacity frees"

PG_CPPFLAGS = -Iinclude -I$(libpq_srcdir)
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Werror
SHLIB_LINK_INTERNAL = $(libpq)

REGRESS = protocol outbox security
REGRESS_OPTS = --inputdir=test --outputdir=test \
	--temp-config=test/aion_wake.conf --temp-instance=test/tmp_check \
	--load-extension=aion_wake

ISOLATION = protocol outbox
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=test/isolation \
	--temp-config=test/aion_wake.conf --temp-instance=test/tmp_check_iso \
	--load-extension=aion_wake

TAP_TESTS = 1
# t/ lives under test/; the shared set-up (AionWake::Test) under test/perl
PROVE_TESTS = test/t/*.pl

EXTRA_CLEAN = test/results test/tmp_check test/tmp_check_iso test/regression.* test/log \
	test/isolation/output_iso test/isolation/results test/isolation/log test/isolation/regression.*

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after PGXS, which empties it: the TAP tests' shared set-up (AionWake::Test)
PROVE_FLAGS += -I test/perl

# PGXS does not track header dependencies: rebuild everything when one changes
$(OBJS): $(wildcard include/*.h)
