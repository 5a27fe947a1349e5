/*
 * aion_wake_rates.pml -- a Promela model of rates and pauses (G10,
 * doc/design.md and /work/shared/DESIGN.md "Rates, pauses, priorities and
 * batches"), checked by spin (run it with test/model/run.sh; what is
 * modelled and what is not is in test/model/README.md, section "Rates and
 * pauses").
 *
 * Why a model of its own: the limits model (aion_wake_limits.pml) already
 * needs 2-12 M states per configuration for leases, settles, fences and
 * many-topic waits; a rate adds a log of starts, rate_reserved, a pause, the
 * worker's timer and a clock that must run past a whole window, and its
 * product with the limits model's state does not fit CI's budget.  A rate
 * touches the rest only through the limit's free slots (both must allow)
 * and the waiter registry, so this model keeps a limit (reservations and
 * lease records, a settle that releases a slot and wakes one) and the
 * registry of the limits model (register before the probe, a wake into the
 * inbox, rule 2 at leave, rule 3 at the return) over one topic, and leaves
 * out fences, parks, lease ends and other topics.
 *
 * The design modelled (issue 24, item 7; where it leaves a choice, the code
 * being written beside it: src/rate_ledger.c, src/rate_window.c,
 * src/rates.c, src/limits.c).  The rate's state, per topic, in shared
 * memory under the set lock: max_starts (MAXS), per (PER), a log of recent
 * starts (lg[t]: starts logged at time t), rate_reserved (rr),
 * paused_until (pu), the topic's rate-blocked mark (rb); the worker's
 * timer (wt).
 *   - Admission (aw_limits_reserve -> aw_ledger_reserve -> aw_rate_admit,
 *     one hold of the set lock, with the limit's reservation): at the clock
 *     a read under the lock, free = max_starts - (logged starts in
 *     (a - per, a]) - rate_reserved (0 while a < paused_until); the claim
 *     reserves min(want, free, the limit's free slots); rate_reserved +=
 *     that.  A claim cut by the rate or the pause (free < want) marks the
 *     topic blocked and, if it was not, wakes the worker.
 *   - The claim statement locks and leases rows at its own clock (>= a):
 *     each row is a start, at that clock.
 *   - After the statement (aw_claim_open_leases -> aw_limits_return ->
 *     aw_ledger_rate_return, one hold of the set lock): the used starts are
 *     logged at the clock read then, rate_reserved -= reserved, and each
 *     unused start of a blocked topic wakes one blocked claimer; then the
 *     limit's leases open and its unused slots go back (Wake rules: 3).
 *   - Transaction end: commit or rollback leaves the log alone; a
 *     reservation not yet returned (the statement raised) goes back at the
 *     abort (aw_limits_at_abort_reserve: the rate's part wakes one blocked
 *     claimer per start of a blocked topic, the limit's part nobody).
 *   - The worker (aw_rates_wake -> aw_ledger_rate_wakes, then
 *     aw_waiters_wake), woken by its latch or its timer: if the blocked
 *     topic may start rows now, k = min(free, the limit's free slots)
 *     claimers are woken and the mark goes; else its timer is
 *     paused_until, or the moment enough logged starts have left the
 *     window (that start's time + per, aw_rate_window_next), or none when
 *     the reservations alone fill it.
 *   - Rows become claimable by commits (enqueue) that wake one waiter each;
 *     a rolled-back claim makes its rows claimable again and wakes one each
 *     (Wake rules: 1); complete() releases its limit slot and wakes one.
 *   - RESTORE: shared memory lost, the window taken as full at the load
 *     moment (one log entry of max_starts at the load time).
 *
 * Each atomic step is one hold of the set lock, one hold of the waiter lock
 * (folded with the set lock hold it follows where the code takes one right
 * after the other and nothing in between matters, as in the limits model),
 * one SQL statement or one commit; comments name the C function.
 *
 * Properties:
 *   G10  no window [w, w + per) holds more than max_starts starts, counted
 *        from the statements' clocks (ghost hist[]), whatever the claims'
 *        outcome: checked at every start (assert on g10_over)
 *   G10w in a quiescent state (no claim, probe, leave or transaction end
 *        under way, no woken claimer that has not probed, the worker's
 *        latch clear, its timer not due, the worker not between its steps)
 *        no claimer sleeps while a start is possible now (not paused,
 *        free > 0, the limit allowing) and a row is claimable (monitor
 *        g10_stranded)
 *   G10x in a quiescent state nothing is reserved (rate or limit) and the
 *        limit's lease records are exactly the live leases (monitor
 *        g10_books)
 *   G10p the worker never sets its timer for a moment that has come: no
 *        polling (assert on g10_poll)
 *   G10q no wake loop: at most NC wakes of a queued claimer by unused
 *        starts of a blocked topic between two events that change the rows
 *        (a start, an enqueue, a rollback) (assert on g10_loop)
 *   and no deadlock (spin's invalid end states; a claimer may sleep at the
 *   end: endsleep).
 *
 * Options (spin -D...):
 *   NC=2|3        claimers (default 2)
 *   NR=1..3       rows (default 2); ROWS0 of them claimable at the start
 *                 (default NR), the others enqueued later, one commit each
 *   MAXS, PER     max_starts (default 1), per (default 2 ticks; 2..4)
 *   WANT          max_rows of every claim (default 1)
 *   TMAX          the clock stops at TMAX (default PER + 2)
 *   LIMIT         max_in_flight of the topic (default 0: none)
 *   PAUSE=u       the topic is paused until u at the start
 *   MAXCL1..3     claims of each claimer (default 2, 1, 1)
 *   ROLE1..3      what each claimer does (a mask): 1 claim(wait),
 *                 2 claim(), 4 complete() its lease (LIMIT), 8 roll back,
 *                 16 its claim statement may raise (default 15, 15, 15)
 *   CANCEL        a sleeping claim may end (cancel, deadline)
 *   RESTORE       shared memory is lost once (between claims): the log is
 *                 one entry of max_starts at the load moment
 *   COUNT_AHEAD   the admission counts every start logged after a - per,
 *                 also those logged after a (as aw_rate_window_free does)
 * The proposed fixes (README.md, "Rates and pauses"):
 *   FIX_RF1       (R-F1) the worker clears the mark only if, after its
 *                 wakes, no claimer of the topic is left queued and no
 *                 claim was cut since its look; else the mark stays, with
 *                 the timer if nothing may start now
 *   FIX_RF2       (R-F2) a return that logs starts of a blocked topic
 *                 wakes the worker
 *   FIX_RF4       (R-F4) an unused start of a blocked topic wakes a blocked
 *                 claimer only after a readiness event (as rule 3)
 *   FIX_RF5       (R-F5) the worker's wakes for free starts are no
 *                 readiness event (no row came): a probe's unused start is
 *                 not passed on because of them
 *   FIX_RATE      FIX_RF1, FIX_RF2, FIX_RF4 and FIX_RF5
 *   FIX_RF1_FILL  (R-F1, as main fixed it in f2ff2dd) a claim whose
 *                 reservation fills the window marks the topic blocked,
 *                 as one cut short does
 *   FIX_CODE      FIX_RF1_FILL, FIX_RF2 and FIX_RF4: the code of main at
 *                 b4db1e9
 *   FIX_ABORT     (R-F3) the limit's slots given back at an abort wake one
 *                 claimer each
 * Mutants (on top of FIX_RATE), each must be rejected:
 *   MUTANT_R1     a start counted at commit: logged when its claim commits
 *                 (not at all if it rolls back), nothing reserved meanwhile
 *   MUTANT_R2     the worker's timer at the window's start (the oldest
 *                 logged start's time) instead of its end (+ per)
 *   MUTANT_R3     the start logged at the admission clock (read before the
 *                 statement) instead of the clock read after it
 *   MUTANT_R4     a rolled-back claim's starts removed from the log
 *   MUTANT_R5     no rate-blocked mark: the worker never times a wake
 *   MUTANT_R6     the admission clock read before the set lock is taken
 *                 (the code reads it under the lock, in aw_ledger_reserve)
 *
 * Copyright (c) 2026, aion_wake authors
 */

#ifndef NC
#define NC      2
#endif
#ifndef NR
#define NR      2
#endif
#ifndef ROWS0
#define ROWS0   NR
#endif
#ifndef MAXS
#define MAXS    1
#endif
#ifndef PER
#define PER     2
#endif
#ifndef TMAX
#define TMAX    (PER + 2)
#endif
#ifndef LIMIT
#define LIMIT   0
#endif
#ifndef PAUSE
#define PAUSE   0
#endif
#ifndef MAXCL1
#define MAXCL1  2
#endif
#ifndef MAXCL2
#define MAXCL2  1
#endif
#ifndef MAXCL3
#define MAXCL3  1
#endif
#define R_WAIT     1
#define R_NOWAIT   2
#define R_SETTLE   4
#define R_RB       8
#define R_RAISE    16
#ifndef ROLE1
#define ROLE1   15
#endif
#ifndef ROLE2
#define ROLE2   15
#endif
#ifndef ROLE3
#define ROLE3   15
#endif

#ifdef FIX_RATE
#define FIX_RF2
#define FIX_RF1
#define FIX_RF4
#define FIX_RF5
#endif
#ifdef FIX_CODE
#define FIX_RF2
#define FIX_RF1_FILL
#define FIX_RF4
#endif

#define NOEND   255
#define NT      (TMAX + PER + 1)    /* times 0 .. TMAX, and the windows' ends past it */
#ifndef WANT
#define WANT    1                   /* max_rows of every claim */
#endif

/* row states */
#define S_ABSENT   0    /* not enqueued yet */
#define S_READY    1    /* committed, claimable */
#define S_LOCKED   2    /* locked and leased by a claim in progress */
#define S_LEASED   3    /* leased by a committed claim (a live lease) */
#define S_DONE     4    /* completed (or, unlimited, off the model's books) */

byte now = 0;

/* ---- the rows ---- */
byte rs[NR];
byte lk[NR];            /* the claimer whose claim holds it */

/* ---- the set: the rate (per topic, under the set lock) ---- */
byte lg[NT];            /* the log: starts logged at time t */
byte rr = 0;            /* rate_reserved */
byte pu = PAUSE;        /* paused_until */
bool rb = false;        /* the topic is rate-blocked (the worker's mark) */
#ifdef FIX_RF1
bool rb_cut = false;    /* (R-F1 fixed) a claim was cut since the worker's look (the code: a generation number) */
#endif
/* ---- ... the limit ---- */
byte rsvd = 0;          /* reserved slots */
byte nrec = 0;          /* lease records */

/* ---- the worker ---- */
bool w_busy = false;    /* between its look and its last step */
bool wl = false;        /* its latch */
byte wt = NOEND;        /* its timer: the next admission moment */

/* ---- the waiter registry (one topic); claimers are 1..3 ---- */
bool w_reg[4];
bool w_q[4];            /* queued: a wake may take it */
bool w_in[4];           /* a wake in its inbox (its latch set) */
bool w_sleep[4];        /* in WaitLatch */
bool rg_win[4];         /* it read ready_gen before reserving ... */
bool rg_dirty[4];       /* ... and ready_gen changed since */

bool busy[4];           /* in a claim, a probe, a leave or a transaction end */
byte hm[4];             /* the rows whose leases it holds (a mask) */

/* ---- ghosts ---- */
byte hist[NT];          /* starts by their statement's clock */
bool g10_over = false;
bool g10_stranded_f = false;
bool g10_books_wrong = false;
bool g10_poll = false;
bool g10_loop = false;
byte uwakes = 0;            /* wakes by unused starts of a blocked topic since a row last became claimable or was taken */

#define REG_ON      (w_reg[1] || w_reg[2] || w_reg[3])
#define QUEUED      ((w_q[1] -> 1 : 0) + (w_q[2] -> 1 : 0) + (w_q[3] -> 1 : 0))

/*
 * logged starts in the window (a - PER, a], into v; with COUNT_AHEAD, as
 * aw_rate_window_free() counts, every start logged after a - PER (one
 * logged after a too, which only a clock read before the set lock can
 * see: MUTANT_R6)
 */
#ifdef COUNT_AHEAD
#define AHEAD_OK(i, a)  true
#else
#define AHEAD_OK(i, a)  (i <= a)
#endif
inline inwin(a, v)
{
	v = 0;
	for (i : 0 .. NT - 1) {
		if
		:: i + PER > a && AHEAD_OK(i, a) -> v = v + lg[i]
		:: else -> skip
		fi
	}
	i = 0
}

/* starts possible now by the rate alone (0 while paused), into v */
inline rate_free(v)
{
	inwin(now, v);
	if
	:: now >= pu && MAXS > v + rr -> v = MAXS - v - rr
	:: else -> v = 0	/* paused, or the window full */
	fi
}

/* free slots of the limit (WANT when unlimited), into v */
#if LIMIT > 0
#define LIM_FREE(v)  v = (LIMIT > rsvd + nrec -> LIMIT - rsvd - nrec : 0)
#else
#define LIM_FREE(v)  v = WANT
#endif

/* ------------------------------------------------------------------
 * The waiter registry (src/waiters.c), under the waiter lock
 * ------------------------------------------------------------------ */

inline gen_event()
{
	rg_dirty[1] = rg_dirty[1] || rg_win[1];
	rg_dirty[2] = rg_dirty[2] || rg_win[2];
	rg_dirty[3] = rg_dirty[3] || rg_win[3]
}

inline take(k)
{
	w_q[k] = false; w_in[k] = true;
	printf("MSC:    ... wakes C%d\n", k)
}

/* aw_waiters_wake(t, n): a readiness event, and up to n queued waiters woken (any: the code takes the oldest) */
inline wake(n)
{
	if
	:: n > 0 && REG_ON ->
		gen_event();
		do
		:: n > 0 && w_q[1] -> take(1); n--
		:: n > 0 && w_q[2] -> take(2); n--
		:: n > 0 && w_q[3] -> take(3); n--
		:: else -> break
		od
	:: else -> skip
	fi;
	n = 0
}

/* (R-F5 fixed) the worker's wakes for free starts: no readiness event (no row came) */
inline wake_starts(n)
{
#ifdef FIX_RF5
	do
	:: n > 0 && w_q[1] -> take(1); n--
	:: n > 0 && w_q[2] -> take(2); n--
	:: n > 0 && w_q[3] -> take(3); n--
	:: else -> break
	od;
	n = 0
#else
	wake(n)
#endif
}

inline pass_on()
{
	if
	:: w_q[1] -> take(1)
	:: w_q[2] -> take(2)
	:: w_q[3] -> take(3)
	:: else -> printf("MSC:    ... nobody to pass it to\n")
	fi
}

/* aw_waiter_leave: off the queue and unregistered; a wake in the inbox is passed on (rule 2) */
inline leave()
{
	atomic {
		printf("MSC: C%d leaves (inbox %d)\n", c, w_in[c]);
		w_q[c] = false;
		if
		:: w_in[c] -> printf("MSC: C%d passes on its wake (rule 2)\n", c); pass_on()
		:: else -> skip
		fi;
		w_reg[c] = false; w_in[c] = false
	}
}

/* ------------------------------------------------------------------
 * Claimers (src/claim.c, src/limits.c, src/xact.c)
 * ------------------------------------------------------------------ */

/* the worker's latch (aw_waiters_wake_for(AW_WAKE_WORKER)) */
#define WAKE_WORKER  wl = true

/*
 * G10 at a start at clock s: every window [w, w + PER) holding s has at
 * most MAXS starts
 */
inline g10_check(s)
{
	for (i : 0 .. NT - 1) {
		if
		:: i <= s && i + PER > s ->
			v = 0;
			for (j : i .. i + PER - 1) {
				v = v + hist[j]
			}
			j = 0;
			if
			:: v > MAXS -> g10_over = true
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
	i = 0; v = 0;
	assert(!g10_over)
}

proctype claimer(byte c; byte maxcl; byte role)
{
	byte ncl = 0;
	byte i = 0;
	byte j = 0;
	byte v = 0;
	byte n = 0;
	byte a = 0;             /* the admission clock */
	byte res = 0;           /* starts (= limit slots) it reserved */
	byte rfree = 0;
	byte lfree = 0;
	byte gm = 0;            /* the rows its claim leased (a mask) */
	byte ng = 0;            /* ... how many */
	byte lt = 0;            /* the time its starts were logged at */
	bool waiting = false;
	bool raised = false;

end:	do
	:: d_step {
		/* claim(wait => ...): aw_waiter_register(), then ResetLatch() and aw_waiter_rearm(); it probes */
		(role & R_WAIT) && ncl < maxcl && hm[c] == 0 ->
		ncl++; busy[c] = true; waiting = true;
		w_reg[c] = true; w_q[c] = true; w_in[c] = false;
		printf("MSC: C%d claim(wait): registered, probes\n", c)
	   };
		goto claim
	:: d_step {
		(role & R_NOWAIT) && ncl < maxcl && hm[c] == 0 ->
		ncl++; busy[c] = true; waiting = false;
		printf("MSC: C%d claim()\n", c)
	   };
		goto claim
#if LIMIT > 0
	:: atomic {
		/*
		 * complete() of one of its leases, with its token: the commit (the
		 * row gone), then aw_limits_at_commit_settle(): the slot released,
		 * one claimer woken
		 */
		(role & R_SETTLE) && hm[c] != 0 ->
		i = 0;
		do
		:: (hm[c] & (1 << i)) -> break
		:: else -> i++
		od;
		rs[i] = S_DONE; nrec--; hm[c] = hm[c] & ~(1 << i);
		printf("MSC: C%d complete row %d: its slot released\n", c, i);
		i = 0;
		n = 1; wake(n)
	   }
#endif
	:: else -> break
	od;
	goto done;

claim:
	do
#ifdef MUTANT_R6
	:: d_step { a = now; printf("MSC: C%d reads the clock: %d (R6)\n", c, a) };
	   d_step {
#else
	:: d_step {
		a = now;
#endif
		/*
		 * aw_limits_reserve(): aw_waiters_ready_gen() (rule 3), then
		 * aw_ledger_reserve() (set lock): the rate's free starts at the
		 * clock a read under the lock (aw_rate_admit), then the limit's
		 * free slots
		 */
		rg_win[c] = true; rg_dirty[c] = false;
		inwin(a, v);
#ifndef MUTANT_R1
		if
		:: a >= pu && MAXS > v + rr -> rfree = MAXS - v - rr
		:: else -> rfree = 0	/* paused, or the window full */
		fi;
#else
		/* R1: reservations do not count */
		if
		:: a >= pu && MAXS > v -> rfree = MAXS - v
		:: else -> rfree = 0
		fi;
#endif
		LIM_FREE(lfree);
		res = WANT;
		if
		:: rfree < res -> res = rfree
		:: else -> skip
		fi;
		if
		:: lfree < res -> res = lfree
		:: else -> skip
		fi;
#ifndef MUTANT_R1
		rr = rr + res;
#endif
#if LIMIT > 0
		rsvd = rsvd + res;
#endif
		printf("MSC: C%d reserves %d at %d (rate free %d, limit free %d, rate_reserved %d)\n",
		       c, res, a, rfree, lfree, rr);
		if
		:: rfree < WANT ->
#ifndef MUTANT_R5
			/* aw_rate_admit(): cut short, the topic blocked; newly blocked, the worker woken (aw_limits_reserve) */
			if
			:: !rb -> WAKE_WORKER
			:: else -> skip
			fi;
			rb = true;
#ifdef FIX_RF1
			rb_cut = true;
#endif
			printf("MSC: C%d cut by the rate: rate-blocked (the worker woken if newly)\n", c)
#else
			printf("MSC: C%d cut by the rate: no mark (R5)\n", c)
#endif
		:: else -> skip
		fi;
#ifdef FIX_RF1_FILL
		/* (R-F1 fixed as in f2ff2dd) a claim that fills the window marks the topic blocked too */
		if
		:: rfree >= WANT && res > 0 && res == rfree ->
			if
			:: !rb -> WAKE_WORKER
			:: else -> skip
			fi;
			rb = true;
			printf("MSC: C%d fills the window: rate-blocked (the worker woken if newly)\n", c)
		:: else -> skip
		fi;
#endif
		v = 0; rfree = 0; lfree = 0;
		if
		:: res == 0 ->
			/* nothing to claim: the probe ends; a waiting claim sleeps */
			rg_win[c] = false; rg_dirty[c] = false; a = 0;
			if
			:: waiting -> w_sleep[c] = true; busy[c] = false; printf("MSC: C%d sleeps\n", c)
			:: else -> skip
			fi
		:: else -> skip
		fi
	   };
		if
		:: res > 0 ->
			atomic {
				/*
				 * the claim statement: up to res claimable rows, oldest
				 * first, FOR UPDATE SKIP LOCKED, leased: each a start, at
				 * the statement's clock
				 */
				if
				:: (role & R_RAISE) -> raised = true; printf("MSC: C%d claim statement raises\n", c)
				:: true ->
					for (i : 0 .. NR - 1) {
						if
						:: ng < res && rs[i] == S_READY ->
							rs[i] = S_LOCKED; gm = gm | (1 << i); ng++;
							printf("MSC: C%d claim: leases row %d at %d (a start)\n", c, i, now)
						:: else -> skip
						fi
					}
					i = 0;
					if
					:: ng > 0 -> hist[now] = hist[now] + ng; uwakes = 0; g10_check(now)
					:: else -> printf("MSC: C%d claim: no row\n", c)
					fi
				fi
			};
			if
			:: !raised ->
				atomic {
					/*
					 * aw_claim_open_leases(): aw_limits_open_leases(), then
					 * aw_limits_return(): aw_ledger_rate_return() (set
					 * lock: the starts logged at the clock read then,
					 * rate_reserved -= reserved; the unused starts of a
					 * blocked topic wake one blocked claimer each), then the
					 * unused limit slots back (aw_ledger_unreserve) and rule 3
					 */
#ifdef MUTANT_R3
					lt = a;
#else
					lt = now;
#endif
#ifndef MUTANT_R1
					lg[lt] = lg[lt] + ng;
					rr = rr - res;
#endif
#if LIMIT > 0
					rsvd = rsvd - res;
					nrec = nrec + ng;
#endif
					printf("MSC: C%d returns: %d start(s) logged at %d (rate_reserved %d)\n", c, ng, lt, rr);
#ifndef MUTANT_R1
					if
#ifndef FIX_RF4
					:: ng < res && rb ->
#else
					/* (R-F4 fixed) only after a readiness event, as rule 3 */
					:: ng < res && rb && rg_dirty[c] ->
#endif
						printf("MSC: C%d unused starts of a rate-blocked topic back: wake one each\n", c);
						n = res - ng;
						/* the ghost of the wake loop: wakes by unused starts since the last row */
						if
						:: REG_ON && (w_q[1] || w_q[2] || w_q[3]) -> uwakes++
						:: else -> skip
						fi;
						g10_loop = (uwakes > NC);
						assert(!g10_loop);
						wake(n)
					:: else -> skip
					fi;
#endif
#ifdef FIX_RF2
					if
					:: rb && ng > 0 -> WAKE_WORKER; printf("MSC: C%d logs starts of a rate-blocked topic: wakes the worker (R-F2 fixed)\n", c)
					:: else -> skip
					fi;
#endif
					if
					:: LIMIT > 0 && ng < res && rg_dirty[c] ->
						printf("MSC: C%d an unused limit slot back after a readiness event: wake one (rule 3)\n", c);
						n = 1; wake(n)
					:: else -> skip
					fi;
					rg_win[c] = false; rg_dirty[c] = false; res = 0; a = 0;
					if
					:: ng == 0 && waiting -> w_sleep[c] = true; busy[c] = false; printf("MSC: C%d sleeps\n", c)
					:: ng == 0 && !waiting -> busy[c] = false; lt = 0
					:: else -> skip
					fi
				}
			:: else -> skip
			fi
		:: else -> skip
		fi;
		if
		:: raised ->
			/* the error ends the wait (aw_claim_leave in PG_CATCH), then the abort */
			if
			:: waiting -> leave()
			:: else -> skip
			fi;
			atomic {
				/*
				 * aw_limits_at_abort_reserve(): aw_ledger_rate_return(used
				 * 0) (of a blocked topic, one wake per start), the limit's
				 * slots back (aw_ledger_unreserve, no wake)
				 */
#ifndef MUTANT_R1
				rr = rr - res;
#endif
#if LIMIT > 0
				rsvd = rsvd - res;
#endif
				printf("MSC: C%d ABORT: its reservation back (rate_reserved %d)\n", c, rr);
				if
#ifndef MUTANT_R1
				:: rb -> printf("MSC: C%d ... of a rate-blocked topic: wake %d\n", c, res); n = res; wake(n)
#endif
#ifdef FIX_ABORT
				/* the limit's slots given back wake one each too (R-F3 fixed) */
				:: !rb && LIMIT > 0 -> printf("MSC: C%d ... limit slots: wake %d (R-F3 fixed)\n", c, res); n = res; wake(n)
#endif
				:: else -> skip
				fi;
				rg_win[c] = false; rg_dirty[c] = false; res = 0; a = 0;
				raised = false; busy[c] = false
			};
			break
		:: !raised && ng > 0 -> break
		:: !raised && ng == 0 && !waiting -> break
		:: !raised && ng == 0 && waiting ->
			/* asleep: woken, or the wait ends (a claimer may sleep forever when nothing comes) */
endsleep:		if
			:: d_step {
				/* its latch set: ResetLatch(); aw_waiter_rearm(); probe */
				w_in[c] ->
				w_sleep[c] = false; busy[c] = true;
				w_in[c] = false; w_q[c] = true;
				printf("MSC: C%d woken: probes\n", c)
			   }
#ifdef CANCEL
			:: d_step {
				w_sleep[c] = false; busy[c] = true;
				printf("MSC: C%d wait ends (cancel, deadline)\n", c)
			   };
				leave();
				d_step { busy[c] = false };
				break
#endif
			fi
		fi
	od;

	if
	:: ng > 0 ->
		if
		:: waiting -> leave()
		:: else -> skip
		fi;
		if
		:: d_step {
			/* COMMIT: the leases committed; the log untouched */
			for (i : 0 .. NR - 1) {
				if
				:: (gm & (1 << i)) -> rs[i] = (LIMIT > 0 -> S_LEASED : S_DONE)
				:: else -> skip
				fi
			}
			i = 0;
#if LIMIT > 0
			hm[c] = gm;
#endif
#ifdef MUTANT_R1
			/* R1: the starts counted at commit */
			lg[now] = lg[now] + ng;
#endif
			printf("MSC: C%d COMMIT claim\n", c);
			gm = 0; ng = 0; lt = 0; busy[c] = false
		   }
		:: (role & R_RB) ->
			d_step {
				/* ROLLBACK: the rows claimable again, their locks released */
				for (i : 0 .. NR - 1) {
					if
					:: (gm & (1 << i)) -> rs[i] = S_READY
					:: else -> skip
					fi
				}
				i = 0; uwakes = 0;
				printf("MSC: C%d ROLLBACK claim\n", c)
			};
			atomic {
				/*
				 * the callbacks: aw_limits_at_abort_leases() (set lock),
				 * each row claimable again wakes one (rule 1); the log
				 * keeps the starts
				 */
#if LIMIT > 0
				nrec = nrec - ng;
#endif
#ifdef MUTANT_R4
				lg[lt] = lg[lt] - ng;
				printf("MSC: C%d the rolled-back starts removed from the log (R4)\n", c);
#endif
				n = ng; wake(n);
				gm = 0; ng = 0; lt = 0; busy[c] = false
			}
		fi
	:: else -> skip
	fi;
	waiting = false;
	goto end;
done:
	skip
}

/* ------------------------------------------------------------------
 * The worker (src/worker.c): the rate-blocked topic's timer
 * ------------------------------------------------------------------ */

/*
 * The worker's timer for the blocked topic (aw_rate_free, aw_rate_window_next):
 * paused_until while paused; else, the window full, the moment enough of
 * the logged starts (oldest first) have left it that one may begin beside
 * the reservations: that start's time + per; none when the reservations
 * alone fill it; now when one may begin already
 */
inline next_moment()
{
	if
	:: now < pu -> wt = pu
	:: else ->
		inwin(now, v);
		v = v + rr;
		for (i : 0 .. NT - 1) {
			if
			:: wt == NOEND && v >= MAXS && lg[i] > 0 && i + PER > now && i <= now ->
				v = v - lg[i];
				if
				:: v < MAXS ->
#ifndef MUTANT_R2
					wt = i + PER
#else
					wt = i
#endif
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		i = 0; v = 0
	fi;
	printf("MSC: W at %d: the blocked topic's timer: %d (255: none)\n", now, wt);
	/* no polling: a timer is set only for a moment still ahead */
	g10_poll = (wt != NOEND && wt <= now);
	assert(!g10_poll)
}

active proctype worker()
{
	byte i = 0;
	byte v = 0;
	byte k = 0;
	byte n = 0;
	bool left = false;

end:	do
	:: atomic {
		/*
		 * aw_rates_wake() -> aw_ledger_rate_wakes() (set lock), woken by
		 * its latch or its timer: if the blocked topic may start rows now
		 * (not paused, free > 0), k = min(free, the limit's free slots)
		 * claimers are to be woken and the mark goes (R-F1 fixed: it stays
		 * until the last step, which sees whether a claim was cut since);
		 * else the timer is the next admission moment: paused_until, or
		 * when enough logged starts have left the window
		 * (aw_rate_window_next), or none when the reservations alone fill
		 * it (their return wakes by itself)
		 */
		(wl || (wt != NOEND && now >= wt)) ->
		wl = false; wt = NOEND;
		if
		:: rb ->
			rate_free(k);
			if
			:: k > 0 ->
				LIM_FREE(v);
				if
				:: v < k -> k = v
				:: else -> skip
				fi;
				v = 0;
				w_busy = true;
#ifdef FIX_RF1
				rb_cut = false;
				printf("MSC: W at %d: the window admits: %d to wake\n", now, k)
#else
				rb = false;
				printf("MSC: W at %d: the window admits: %d to wake, the mark goes\n", now, k)
#endif
			:: else ->
				/* none may start now: the timer */
				k = 0;
				next_moment()
			fi
		:: else -> k = 0
		fi
	   };
		if
		:: w_busy ->
			atomic {
				/* aw_waiters_wake(t, k) (waiter lock); (R-F1 fixed) are claimers of the topic left queued? */
				n = k; wake_starts(n);
				k = 0;
#ifdef FIX_RF1
				left = (QUEUED > 0)
#else
				w_busy = false
#endif
			};
#ifdef FIX_RF1
			atomic {
				/*
				 * (R-F1 fixed, set lock) the mark goes only if no claimer of
				 * the topic was left queued and no claim was cut since the
				 * first step; else it stays, with the timer if none may
				 * start now (if one may, the starts of those just woken
				 * wake the worker: R-F2's fix)
				 */
				if
				:: !left && !rb_cut -> rb = false; printf("MSC: W the mark goes\n")
				:: else ->
					printf("MSC: W the mark stays (claimers left queued %d, cut since %d)\n", left, rb_cut);
					rate_free(k);
					if
					:: k == 0 -> next_moment()
					:: else -> skip
					fi;
					k = 0
				fi;
				rb_cut = false; left = false; w_busy = false
			}
#endif
		:: else -> skip
		fi
	od
}

/* ------------------------------------------------------------------
 * Enqueue: rows become claimable, one commit each, each waking one
 * ------------------------------------------------------------------ */

active proctype producer()
{
	byte r = ROWS0;
	byte n = 0;

end:	do
	:: atomic {
		r < NR ->
		rs[r] = S_READY; uwakes = 0;
		printf("MSC: P enqueue row %d COMMIT: wakes one\n", r);
		n = 1; wake(n);
		r++
	   }
	:: r >= NR -> break
	od
}

#ifdef RESTORE
#define IDLE(k)   (!busy[k] && !w_sleep[k] && !w_reg[k])
active proctype restore()
{
	byte i = 0;

end:	atomic {
		/* shared memory lost (every claim gone), then the load: the window taken as full at the load moment */
		IDLE(1) && IDLE(2) && IDLE(3) ->
		for (i : 0 .. NT - 1) {
			lg[i] = 0
		}
		i = 0;
		lg[now] = MAXS; rr = 0; rb = false; wt = NOEND; wl = false;
#if LIMIT > 0
		rsvd = 0;
#endif
		printf("MSC: L restart: the log is %d start(s) at %d\n", MAXS, now)
	}
}
#endif

/* the clock; a tick forgets the starts no window ahead can hold */
active proctype clock()
{
	byte i = 0;

end:	do
	:: now < TMAX -> d_step {
		now++;
		for (i : 0 .. NT - 1) {
			if
			:: i + PER <= now -> lg[i] = 0; hist[i] = 0
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: T clock %d\n", now)
	   }
	:: else -> break
	od
}

/* ------------------------------------------------------------------
 * Properties
 * ------------------------------------------------------------------ */

#define WOKEN(k)        (w_sleep[k] && w_in[k])
#define QUIESCENT       (!busy[1] && !busy[2] && !busy[3] && !WOKEN(1) && !WOKEN(2) && !WOKEN(3) && \
                         !w_busy && !wl && (wt == NOEND || wt > now))
#define CLAIMABLE_R(r)  (rs[r] == S_READY)
#if NR == 1
#define CLAIMABLE       CLAIMABLE_R(0)
#define LEASED          (rs[0] == S_LEASED -> 1 : 0)
#elif NR == 2
#define CLAIMABLE       (CLAIMABLE_R(0) || CLAIMABLE_R(1))
#define LEASED          ((rs[0] == S_LEASED -> 1 : 0) + (rs[1] == S_LEASED -> 1 : 0))
#else
#define CLAIMABLE       (CLAIMABLE_R(0) || CLAIMABLE_R(1) || CLAIMABLE_R(2))
#define LEASED          ((rs[0] == S_LEASED -> 1 : 0) + (rs[1] == S_LEASED -> 1 : 0) + (rs[2] == S_LEASED -> 1 : 0))
#endif
/* starts the log admits now (the reservations are 0 when quiescent) */
#if PER == 2
#define INWIN_NOW       (lg[now] + (now >= 1 -> lg[now - 1] : 0))
#elif PER == 3
#define INWIN_NOW       (lg[now] + (now >= 1 -> lg[now - 1] : 0) + (now >= 2 -> lg[now - 2] : 0))
#else
#define INWIN_NOW       (lg[now] + (now >= 1 -> lg[now - 1] : 0) + (now >= 2 -> lg[now - 2] : 0) + (now >= 3 -> lg[now - 3] : 0))
#endif
#define START_POSSIBLE  (now >= pu && INWIN_NOW + rr < MAXS && (LIMIT == 0 || rsvd + nrec < LIMIT))
#define ASLEEP          (w_sleep[1] || w_sleep[2] || w_sleep[3])
#define STRANDED        (QUIESCENT && ASLEEP && START_POSSIBLE && CLAIMABLE)
#define BOOKS_WRONG     (QUIESCENT && (rr != 0 || rsvd != 0 || (LIMIT > 0 && nrec != LEASED)))

active proctype g10_stranded()
{
end:	atomic { STRANDED -> g10_stranded_f = true; assert(!g10_stranded_f) }
}

active proctype g10_books()
{
end:	atomic { BOOKS_WRONG -> g10_books_wrong = true; assert(!g10_books_wrong) }
}

init
{
	byte r;

	atomic {
		for (r : 0 .. NR - 1) {
			if
			:: r < ROWS0 -> rs[r] = S_READY
			:: else -> skip
			fi
		}
		r = 0;
		run claimer(1, MAXCL1, ROLE1);
		run claimer(2, MAXCL2, ROLE2);
#if NC == 3
		run claimer(3, MAXCL3, ROLE3)
#endif
	}
}
