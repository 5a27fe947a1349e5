/*
 * aion_wake_limits.pml -- a Promela model of known-capacity limits (G8) and
 * of claims blocked on one or several topics (G9), checked by spin (run it
 * with test/model/run.sh; what is modelled and what is not is in
 * test/model/README.md, section "Limits and many-topic waits").
 *
 * G8 and G9 are guarantees of doc/design.md; "rule N" below is its Wake
 * rules: N (section "Wake rules").
 *
 * Why: G8 says a limited topic never has more live leases than its limit
 * and that no slot idles while a claimer of the topic waits and a row of it
 * is claimable; G9 says no waiter sleeps while one of its topics holds a row
 * it could claim.  Both are claims about interleavings: reservations racing
 * row locks, a settle's commit racing a lease's end, a rollback racing the
 * worker's look at the fences, a wake landing in the middle of a probe.
 * Here spin tries every interleaving of two or three claimers (each one
 * claims, with or without waiting, and settles or abandons what it took,
 * in transactions that commit or roll back), the worker (lease expiry and
 * its look at passed fences) and a clock, over NR rows of one or two
 * topics, and checks:
 *
 *   G8   at every moment, a limited topic has at most max_in_flight live
 *        leases, counted from the rows themselves: a lease is live from the
 *        claim's UPDATE until the commit of its settle, the rollback of the
 *        claim, or its end; a lease settled by the transaction that holds
 *        its successor does not count; the limit is the committed one
 *        (aion_wake.limits), and a limit applied to a topic with more live
 *        leases lets them drain, the bound coming down as they end
 *        (monitor g8_limit);
 *   G8x  in a quiescent state (no transaction, probe or callback under
 *        way, nobody woken, nothing for the worker to do now) the set's
 *        books are exact: no reservation is left and its lease records are
 *        exactly the live leases -- none released twice, none leaked
 *        (monitor g8_books);
 *   G8w / G9  in a quiescent state no claimer sleeps while one of its
 *        topics has a free slot (or no limit) and a claimable row: that
 *        slot (or that row) is stranded until some unrelated event
 *        (monitor g8_stranded);
 *   G9p  a claimer that leaves passes on only the wakes it received (the
 *        assert on g9_spurious in leave);
 *   and no deadlock (spin's invalid end state check).
 *
 * Each atomic step is one hold of the set lock (src/lease_ledger.c), one
 * hold of the waiter lock (src/waiters.c), one SQL statement or one commit,
 * mirroring src/claim.c, src/outbox.c, src/xact.c, src/limits.c and
 * src/worker.c; comments name the C function.  A commit makes the rows'
 * new versions visible and releases their locks first; the COMMIT/ABORT
 * callback is a later step, as in PostgreSQL (CallXactCallbacks runs after
 * ProcArrayEndTransaction).
 *
 * The model follows the code of commit a6347ee (limits and many-topic
 * waits; a waiting claim passes on only the wakes it received, 4d60e4c,
 * finding F9; the worker marks a topic ready before it reads its free
 * slots, a6347ee, finding F8; the worker counts the rows whose fence
 * passed since its last look, checked_upto), and, with HAND, SETLIM and
 * LOAD, what the fixed lease ledger and loading of limits must do: a
 * settle is idempotent per (key, token) within a transaction; a re-take's
 * rollback puts back the settled lease's record; set_limit() applies its
 * transaction's last call alone and counts live leases with a snapshot
 * taken after its exclusive topic lock; a load that fails is retried and
 * the topic's claims take nothing meanwhile.  Left out: pulses and the
 * slots they hand to claimers, untracked leases, databases no worker
 * serves, set_limit() and claims or settles in one transaction.
 *
 * Options (spin -D...):
 *   NR=1|2|3      rows (default 2)
 *   NC=2|3        claimers (default 2)
 *   NT=1|2        topics (default 1).  With NT=2 rows alternate between the
 *                 topics and claimer 1 waits on both (claim(topics[])),
 *                 claimer 2 on topic 0, claimer 3 on topic 1
 *   LIMIT=n       max_in_flight of topic 0 (default 1)
 *   LIMIT1=n      max_in_flight of topic 1 (default 0: unlimited)
 *   TMAX, MAXOPS  the clock stops at TMAX (default 3); each claimer makes
 *                 MAXOPS claims and settles (default 3)
 *   LATE1         row 1 is enqueued with a delay: its fence is 1
 *   DEADLINE      a waiting claim may also end at its deadline
 *   PARK          settles may park (a fence PARKB ahead) too
 *   HAND          (one topic) claimer 2 with R_HAND in its role (16) may
 *                 also run the zero-gap hand-off: settle its lease, maybe
 *                 settle it again (fail() or dead_letter() with the same
 *                 token), claim(topic, 2) in the same transaction -- which
 *                 may take the settled row again (a re-take) -- and commit
 *                 or roll back
 *   SETLIM        (one topic) an operator runs one set_limit()
 *                 transaction: set_limit(t, NEWLIM) (default 1), or
 *                 set_limit(t, NULL); set_limit(t, NEWLIM), READ COMMITTED
 *                 or REPEATABLE READ; LIMIT=0 starts the topic unlimited
 *   LOAD          (one topic) a restart: the set holds no limit, claimer 2
 *                 holds a live lease taken before it, and the worker's
 *                 load of the limits may fail (the topic table full) and
 *                 is retried; claims of the topic take nothing meanwhile
 * Mutants, each must be rejected:
 *   MUTANT_L1     a settle's commit releases the row's lease record whatever
 *                 its token (no token check in aw_ledger_release)
 *   MUTANT_L2     the claim reserves no slot before it locks rows: it reads
 *                 the free slots, locks and leases, and only then counts
 *                 the lease (reservation after the row lock)
 *   MUTANT_L3     an unused reservation returned when a row became
 *                 claimable since the claim looked wakes nobody (rule 3)
 *   MUTANT_L4     a settle rolled back after its lease ended wakes nobody
 *                 (rule 1)
 *   MUTANT_L5     a claimer that leaves passes no wake on (rule 2)
 *   MUTANT_L6     a lease released at its end wakes nobody
 *   MUTANT_L7     a claim rolled back wakes nobody for the rows it gives
 *                 back (rule 1)
 *   MUTANT_F8     the code before a6347ee: the worker caps its wakes by
 *                 the free slots without marking the topic ready first
 *   MUTANT_F9     the code before 4d60e4c: a waiting claim that got a row
 *                 passes on the wakes of every ready topic it took no row
 *                 of, also those of a first probe, which it was never given
 *   MUTANT_L8     (HAND) a lease settled twice in one transaction is named
 *                 twice in the settled-leases list: its claim reserves two
 *                 handed slots for one lease
 *   MUTANT_L9     (HAND) a re-take's new lease record drops the settled
 *                 lease's record as ended, and a rollback puts back nothing
 *   MUTANT_L10    (SETLIM) the calls of one transaction are applied in
 *                 turn: the removal drops the records, the new limit then
 *                 applies to none
 *   MUTANT_L11    (SETLIM) under REPEATABLE READ the live leases are
 *                 counted with the transaction's snapshot
 *   MUTANT_L12    (LOAD) a load that failed marks the limits loaded: the
 *                 topic is not limited until the next restart
 *
 * Copyright (c) 2026, aion_wake authors
 */

#ifndef NR
#define NR      2
#endif
#ifndef NC
#define NC      2
#endif
#ifndef NT
#define NT      1
#endif
#ifndef LIMIT
#define LIMIT   1
#endif
#ifndef LIMIT1
#define LIMIT1  0
#endif
#ifndef TMAX
#define TMAX    3
#endif
#ifndef MAXCL1
#define MAXCL1  2       /* claims of claimer 1 */
#endif
#ifndef MAXCL2
#define MAXCL2  1       /* ... of claimer 2 */
#endif
#ifndef MAXCL3
#define MAXCL3  1       /* ... of claimer 3 */
#endif
#define LEASE   2       /* claim(): fence = leased_until = clock + LEASE */
#define PARKB   2       /* park(): fence = clock + PARKB */
#define NOEND   255     /* DT_NOEND */

#define B(t)    (1 << (t))
#if NT == 1
#define TOP(r)  0
#define ALLT    1
#else
#define TOP(r)  ((r) % 2)
#define ALLT    3
#endif

/* what a claimer does (its role, a mask) */
#define R_WAIT     1    /* claim(wait => ...) */
#define R_NOWAIT   2    /* claim() without waiting */
#define R_SETTLE   4    /* complete(), fail(), park() what it claimed (else it lets leases expire) */
#define R_RB       8    /* roll back claims and settles too */
#define R_HAND     16   /* (HAND, claimer 2) the zero-gap hand-off: settle, maybe again, then claim(t, 2), in one transaction */
#define R_ALL      15
#ifndef ROLE1
#define ROLE1      R_ALL
#endif
#ifndef ROLE2
#define ROLE2      R_ALL
#endif
#ifndef ROLE3
#define ROLE3      R_ALL
#endif

/* settle kinds */
#define K_COMPLETE 1
#define K_FAIL0    2    /* fail(), back-off 0: claimable at its commit */
#define K_FAIL1    3    /* fail(), back-off 1 tick */
#define K_PARK     4

/* ---- clock ---- */
byte now = 0;

/* ---- the rows (aion_wake.outbox): committed state ---- */
bool c_ex[NR];          /* the row exists (complete() deletes it) */
byte c_ft[NR];          /* visible_after */
byte c_lu[NR];          /* leased_until; 0 is NULL (a lease end is >= LEASE) */
byte c_tok[NR];         /* lease_token (0: never claimed) */
/* ---- row lock and uncommitted write ---- */
byte lockr[NR];         /* holder: 0 free, else the claimer */
bool u_claim[NR];       /* the write is a claim's lease (else a settle, or a row locked and not taken) */
bool u_ex[NR];
byte u_ft[NR];
byte u_lu[NR];
byte u_tok[NR];

/* ---- the set: limits, reservations, lease records (AwTopic, AwLease) ---- */
byte lim[NT];           /* max_in_flight, 0: unlimited */
byte rsvd[NT];          /* reserved */
byte rec_tok[NR];       /* the row's lease record: its token, 0: none */
byte rec_end[NR];

/* ---- the waiter registry (AwWaiter, AwWaitTopic); claimers are 1..3 ---- */
byte w_top[4];          /* the topics a claimer waits on (a mask) */
byte w_reg[4];          /* registered (memberships) */
byte w_q[4];            /* memberships queued */
byte w_in[4];           /* the ready inbox */
bool w_sleep[4];        /* in WaitLatch */
byte nf[NT];            /* next_fence: 0 unknown, NOEND none */
byte hs[NT];            /* hint_since (only read by the look under way: NOEND otherwise) */
byte chk[NT];           /* checked_upto: the worker counted the fences up to it */
bool ckg[NT];           /* checking: the worker looks at the topic */

/* ---- the claimers ---- */
bool busy[4];           /* in a transaction, a probe, a callback or leaving */
byte h_row[4];          /* the lease it holds (after its claim committed) */
byte h_tok[4];          /* ... its token, 0: none */
byte cl_row[4];         /* the lease its claim in progress took */
byte cl_tok[4];         /* ... 0: none */
byte s_row[4];          /* the lease its settle in progress ends */
byte s_tok[4];          /* ... 0: none */
byte rsv[4];            /* topics it holds a reservation of (max_rows = 1) */
byte rg_win[4];         /* topics whose ready_gen it read and will compare */
byte rg_zero[4];        /* ... read as 0 (nobody waits on the topic) */
byte rg_dirty[4];       /* ... changed since */

/*
 * ---- the durable limit and G8's bound ----
 * dlim: max_in_flight as committed in aion_wake.limits (0: none), what G8
 * is about; lim (above) is the set's copy, which claims obey.  gcap: the
 * bound G8 checks, dlim, except that a limit applied to a topic with more
 * live leases lets them drain: gcap is then their number, and it comes
 * down as they end (lowered to max(dlim, live) at each grant).
 */
byte dlim[NT];
byte gcap[NT];

#if defined(HAND) || defined(SETLIM) || defined(LOAD)
/*
 * ---- the topic lock (one topic) ----
 * claims and settles hold it in share mode until their transaction ends
 * (a probe that found nothing: its subtransaction); set_limit() and the
 * load of limits take it exclusively
 */
bool tsh[4];            /* claimer k holds it in share mode */
bool tex = false;       /* held exclusively */
#define TL_FREE         (!tex)
#define TSH_ON          tsh[c] = true
#define TSH_OFF         tsh[c] = false
#define NO_SHARERS      (!tsh[1] && !tsh[2] && !tsh[3])
#else
#define TL_FREE         true
#define TSH_ON          skip
#define TSH_OFF         skip
#endif

#ifdef HAND
/*
 * ---- the zero-gap hand-off (claimer 2 only) ----
 * st_n: how often the settled-leases list names the lease claimer 2's
 * open transaction settled (s_row, s_tok): once, as settle is idempotent
 * per (key, token) within a transaction (twice with MUTANT_L8).  hd: the
 * slots its hand-off claim reserved for settled leases (handed).  The
 * pair (aw_ledger_open): pr_pred, pr_succ, the rows (+ 1) of the
 * settled lease and of the new lease that took its slot; while paired
 * they hold one slot, and so do a handed reservation and its settled
 * lease until the claim's lease opens (hding).  rt_*: the record of the settled lease that the
 * lease of a re-take of the same row replaced, kept to be put back if the
 * transaction rolls back.
 */
byte st_n = 0;
byte hd = 0;
byte hding = 0;         /* handed reservations not yet leases: each shares its settled lease's slot */
byte pr_pred = 0;
byte pr_succ = 0;
byte rt_row = 0;
byte rt_tok = 0;
byte rt_end = 0;
byte nl = 0;            /* the rows claimer 2's hand-off claim leased (a mask) */
byte ntk[NR];           /* ... their tokens, until its transaction has ended */
#define HANDOFFS(t)     (((pr_pred != 0) -> 1 : 0) + hding)
#else
#define HANDOFFS(t)     0
#endif

#ifdef SETLIM
bool op_busy = false;   /* the operator's set_limit() transaction is open */
#endif
#ifdef LOAD
bool loaded = false;    /* this database's limits are in the set */
#define UNLOADED(t)     (!loaded && dlim[t] > 0)
#else
#define UNLOADED(t)     false
#endif

/* ---- the worker ---- */
bool w_busy = false;    /* in a look at fences or an expiry */
byte w_lt = 0;          /* the topic it looks at + 1 (its hint window is open) */
bool g9_spurious = false;   /* a claimer passed on a wake it was never given */

#define REGS        (w_reg[1] | w_reg[2] | w_reg[3])
#define REG_ON(t)   ((REGS & B(t)) != 0)
#define INB(k, t)   (((w_in[k] & B(t)) != 0) -> 1 : 0)
#define NREADY(t)   (INB(1, t) + INB(2, t) + INB(3, t))
#define ONREG(k, t) (((w_reg[k] & B(t)) != 0) -> 1 : 0)
#define NWAIT(t)    (ONREG(1, t) + ONREG(2, t) + ONREG(3, t))

#if NR == 1
#define ANY_ROW(x)      (x(0))
#define SUM_ROW(x, t)   (x(0, t) -> 1 : 0)
#elif NR == 2
#define ANY_ROW(x)      (x(0) || x(1))
#define SUM_ROW(x, t)   ((x(0, t) -> 1 : 0) + (x(1, t) -> 1 : 0))
#else
#define ANY_ROW(x)      (x(0) || x(1) || x(2))
#define SUM_ROW(x, t)   ((x(0, t) -> 1 : 0) + (x(1, t) -> 1 : 0) + (x(2, t) -> 1 : 0))
#endif

/* a live lease (the ghost of G8): an open claim's, or a committed one not settled nor ended */
#define LIVE_ROW(r)     ((lockr[r] != 0 && u_claim[r] && u_lu[r] > now) || (c_ex[r] && c_lu[r] > now))
#define LIVE_IN(r, t)   (TOP(r) == t && LIVE_ROW(r))
#define LIVE(t)         SUM_ROW(LIVE_IN, t)
/*
 * G8's count: a lease settled by a transaction that holds its successor
 * does not count as live (the two share one slot).  Claimer 2's hand-off
 * settled one lease (s_row, still live, its row's write a settle) and
 * holds n new leases: max(1, n) slots, not 1 + n.
 */
#ifdef HAND
#define NEWL_IN(r, t)   (TOP(r) == t && lockr[r] == 2 && u_claim[r] && u_lu[r] > now)
#define SUCC_PAIRED(t)  (s_tok[2] != 0 && TOP(s_row[2]) == t && lockr[s_row[2]] == 2 && \
                         !u_claim[s_row[2]] && c_ex[s_row[2]] && c_lu[s_row[2]] > now && \
                         SUM_ROW(NEWL_IN, t) > 0)
#define GLIVE(t)        (LIVE(t) - (SUCC_PAIRED(t) -> 1 : 0))
#else
#define GLIVE(t)        LIVE(t)
#endif
#define REC_IN(r, t)    (TOP(r) == t && rec_tok[r] != 0)
#define NREC(t)         SUM_ROW(REC_IN, t)
#define EXPIRABLE(r)    (rec_tok[r] != 0 && rec_end[r] <= now)
#define CLAIMABLE_IN(r, t) (TOP(r) == t && c_ex[r] && c_ft[r] <= now && lockr[r] == 0)
#define CLAIMABLE(t)    (SUM_ROW(CLAIMABLE_IN, t) > 0)

#ifdef HAND
#define RT_USED(r, v)   ((rt_row == r + 1 && v == rt_tok) || ((nl & B(r)) && v == ntk[r]))
#else
#define RT_USED(r, v)   false
#endif

/* is token v of row r referred to by anything? */
#define TOK_USED(r, v) \
	(v == c_tok[r] || (lockr[r] != 0 && v == u_tok[r]) || v == rec_tok[r] || \
	 (h_row[1] == r && v == h_tok[1]) || (h_row[2] == r && v == h_tok[2]) || \
	 (h_row[3] == r && v == h_tok[3]) || \
	 (cl_row[1] == r && v == cl_tok[1]) || (cl_row[2] == r && v == cl_tok[2]) || \
	 (cl_row[3] == r && v == cl_tok[3]) || \
	 (s_row[1] == r && v == s_tok[1]) || (s_row[2] == r && v == s_tok[2]) || \
	 (s_row[3] == r && v == s_tok[3]) || RT_USED(r, v))

/* a fresh lease_token for row r, in v: the smallest one nothing refers to */
inline new_tok(r, v)
{
	v = 1;
	do
	:: TOK_USED(r, v) -> v++
	:: else -> break
	od
}

/*
 * A grant of topic t: a limit applied over more live leases lets them
 * drain, and G8's bound comes down with them, never below the limit
 */
#ifdef SETLIM
#define GCAP_GRANT(t) \
	if \
	:: dlim[t] > 0 && gcap[t] > dlim[t] -> gcap[t] = (GLIVE(t) > dlim[t] -> GLIVE(t) : dlim[t]) \
	:: else -> skip \
	fi
#else
#define GCAP_GRANT(t) skip
#endif

/* slots of limited topic t in use (aw_topic_used), in v */
inline used(t, v)
{
	v = rsvd[t] + NREC(t) - HANDOFFS(t)
}

/* ------------------------------------------------------------------
 * The waiter registry (src/waiters.c), under the waiter lock
 * ------------------------------------------------------------------ */

/* a readiness event of topic t: ready_gen changes for those comparing it */
inline gen_event(t)
{
	rg_dirty[1] = rg_dirty[1] | (rg_win[1] & B(t));
	rg_dirty[2] = rg_dirty[2] | (rg_win[2] & B(t));
	rg_dirty[3] = rg_dirty[3] | (rg_win[3] & B(t))
}

/* aw_wait_topic_wake, one waiter k: off the queue, t into its inbox (its latch set) */
inline take(k, t)
{
	w_q[k] = w_q[k] & ~B(t);
	w_in[k] = w_in[k] | B(t);
	printf("MSC:    ... wakes C%d for topic %d\n", k, t)
}

/*
 * aw_waiters_wake(t, n): a readiness event, and up to n queued waiters of
 * t woken (any of them: the code takes the oldest, the model lets spin
 * choose).  n is used up.  Call inside atomic.
 */
inline wake(t, n)
{
	if
	:: n > 0 && REG_ON(t) ->
		gen_event(t);
		do
		:: n > 0 && (w_q[1] & B(t)) -> take(1, t); n--
		:: n > 0 && (w_q[2] & B(t)) -> take(2, t); n--
		:: n > 0 && (w_q[3] & B(t)) -> take(3, t); n--
		:: else -> break
		od
	:: else -> skip
	fi;
	n = 0
}

/* one queued waiter of t, if any, takes a wake passed on (no readiness event) */
inline pass_on(t)
{
	if
	:: (w_q[1] & B(t)) -> take(1, t)
	:: (w_q[2] & B(t)) -> take(2, t)
	:: (w_q[3] & B(t)) -> take(3, t)
	:: else -> printf("MSC:    ... nobody to pass it to\n")
	fi
}

/*
 * aw_waiters_fence_hint(t, f, 1) at COMMIT: a row of t got fence f.  If
 * the worker is looking at t now (checking) or has counted past f already
 * (f <= checked_upto), it will not count the row: wake one waiter here
 * (aw_waiters_wake after the lock, folded in).  Otherwise lower hint_since
 * and, if f is earlier, the worker's next fence of t (and wake it: the
 * worker is modelled by the conditions that let it act, so waking it is
 * implicit).  hint_since is only read by fence_result, and reset by
 * due_fences, so only a hint to an entry made anew while the worker looks
 * (checking false) is kept in hs.  Call inside atomic; uses n.
 */
inline fence_hint(t, f)
{
	if
	:: REG_ON(t) && (ckg[t] || f <= chk[t]) ->
		n = 1; wake(t, n)
	:: REG_ON(t) && !(ckg[t] || f <= chk[t]) ->
		if
		:: w_lt == t + 1 && f < hs[t] -> hs[t] = f
		:: else -> skip
		fi;
		if
		:: nf[t] != 0 && f < nf[t] -> nf[t] = f
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/* aw_wait_topic_find(HASH_ENTER_NULL): a new entry of topic t */
inline new_entry(t)
{
	nf[t] = 0; chk[t] = now; ckg[t] = false; hs[t] = NOEND;
	gen_event(t)
}

/* the last waiter of t left: its entry is gone (the model forgets its fields) */
inline drop_entry(t)
{
	nf[t] = 0; chk[t] = 0; ckg[t] = false; hs[t] = NOEND
}

/* ------------------------------------------------------------------
 * Claimers: claim() (src/claim.c), then complete, fail or park
 * (src/outbox.c), or let the lease expire
 * ------------------------------------------------------------------ */

/*
 * A probe that found nothing: its subtransaction rolls back (it held
 * nothing), and the claimer sleeps in WaitLatch() until a wake sets its
 * latch.  Folded into the probe's last step: nothing it does in between
 * touches shared state, and a wake that comes first is in its inbox.
 */
#define SLEEP_IF(zz) \
	if \
	:: zz && got == 0 -> w_sleep[c] = true; busy[c] = false; TSH_OFF; printf("MSC: C%d sleeps\n", c) \
	:: else -> skip \
	fi

/*
 * aw_claim_once(mask): reserve, lock and lease, give back what was not
 * used.  Sets got (the row leased + 1, or 0) and gotm (its topic).  With
 * zz, the claimer sleeps if it got nothing (the probe's last try).
 */
inline claim_once(mask, zz)
{
	/*
	 * aw_claim_reserve() -> aw_limits_reserve(): per topic,
	 * aw_waiters_ready_gen() (waiter lock), then aw_ledger_reserve() (set
	 * lock): allow = min(max_rows, limit - used).
	 * One step: a readiness event between the two would only make the
	 * claim wake one more claimer when it gives its reservation back.
	 */
	d_step {
		/* aw_lock_topic(AccessShareLock): waits while set_limit() or a load holds it */
		TL_FREE ->
		TSH_ON;
		cnow = now;
		opn = 0;
		for (t : 0 .. NT - 1) {
			if
			:: (mask & B(t)) && lim[t] > 0 ->
				rg_win[c] = rg_win[c] | B(t);
				rg_dirty[c] = rg_dirty[c] & ~B(t);
				if
				:: REG_ON(t) -> rg_zero[c] = rg_zero[c] & ~B(t)
				:: else -> rg_zero[c] = rg_zero[c] | B(t)
				fi;
				used(t, v);
				if
				:: v < lim[t] ->
#ifndef MUTANT_L2
					rsvd[t]++; rsv[c] = rsv[c] | B(t);
#endif
					opn = opn | B(t)
				:: else -> skip
				fi;
				v = 0
			/* a limited topic whose limit is not loaded yet gives nothing (fail closed) */
			:: (mask & B(t)) && lim[t] == 0 && !UNLOADED(t) -> opn = opn | B(t)
			:: else -> skip
			fi
		}
		t = 0;
		got = 0; gotm = 0;
		printf("MSC: C%d claim: reserves (topics open %d, reserved %d)\n", c, opn, rsv[c]);
		if
		:: opn == 0 ->
			rg_win[c] = 0; rg_zero[c] = 0; rg_dirty[c] = 0; cnow = 0;
			printf("MSC: C%d claim: no free slot\n", c);
			SLEEP_IF(zz)
		:: else -> skip
		fi
	};
	if
	:: opn != 0 ->
		/*
		 * The claim statement: per open topic, its oldest visible row
		 * FOR UPDATE SKIP LOCKED; the oldest of those is leased (fence =
		 * leased_until = clock + lease, a fresh token), the others stay
		 * locked, not taken, until the transaction ends
		 */
		d_step {
			for (t : 0 .. NT - 1) {
				if
				:: (opn & B(t)) ->
					v = NR;
					for (i : 0 .. NR - 1) {
						if
						:: TOP(i) == t && c_ex[i] && c_ft[i] <= cnow && lockr[i] == 0 &&
						   (v == NR || c_ft[i] < c_ft[v]) -> v = i
						:: else -> skip
						fi
					}
					if
					:: v < NR ->
						lockr[v] = c; u_claim[v] = false; u_ex[v] = true;
						u_ft[v] = c_ft[v]; u_lu[v] = c_lu[v]; u_tok[v] = c_tok[v];
						if
						:: got == 0 -> got = v + 1
						:: got != 0 && c_ft[v] < c_ft[got - 1] -> got = v + 1
						:: else -> skip
						fi
					:: else -> skip
					fi
				:: else -> skip
				fi
			}
			t = 0; i = 0; v = 0;
			if
			:: got != 0 ->
				r = got - 1;
				gotm = B(TOP(r));
				GCAP_GRANT(TOP(r));
				new_tok(r, v);
				u_claim[r] = true; u_ft[r] = cnow + LEASE; u_lu[r] = cnow + LEASE; u_tok[r] = v;
				cl_row[c] = r; cl_tok[c] = v; fen = cnow + LEASE;
				v = 0; r = 0;
				printf("MSC: C%d claim: leases row %d until %d (token %d)\n", c, cl_row[c], fen, cl_tok[c])
			:: else -> printf("MSC: C%d claim: no row\n", c)
			fi;
			opn = 0; cnow = 0
		};
		/*
		 * aw_claim_open_leases(): aw_limits_open_leases() (aw_ledger_open),
		 * then each unused reservation back (aw_limits_return,
		 * aw_ledger_unreserve), under the set lock
		 */
		d_step {
			if
			:: got != 0 && lim[TOP(cl_row[c])] > 0 ->
#ifndef MUTANT_L2
				rsvd[TOP(cl_row[c])]--; rsv[c] = rsv[c] & ~gotm;
#endif
				/* aw_lease_add(): a record the row still has is of an ended lease: replaced */
				rec_tok[cl_row[c]] = cl_tok[c]; rec_end[cl_row[c]] = fen;
				printf("MSC: C%d leases open: record of row %d\n", c, cl_row[c])
			:: else -> skip
			fi;
			ret = rsv[c];
			for (t : 0 .. NT - 1) {
				if
				:: (ret & B(t)) ->
					rsvd[t]--;
					printf("MSC: C%d gives back an unused reservation of topic %d\n", c, t)
				:: else -> skip
				fi
			}
			t = 0;
			rsv[c] = 0;
			if
			:: ret == 0 -> rg_win[c] = 0; rg_zero[c] = 0; rg_dirty[c] = 0; SLEEP_IF(zz)
			:: else -> skip
			fi
		};
		if
		:: ret != 0 ->
			/* rule 3 (waiter lock): aw_waiters_ready_gen() changed since it looked: wake one */
			atomic {
				for (t : 0 .. NT - 1) {
					if
#ifndef MUTANT_L3
					:: (ret & B(t)) &&
					   ((((rg_zero[c] & B(t)) != 0) != !REG_ON(t)) || (REG_ON(t) && (rg_dirty[c] & B(t)))) ->
						printf("MSC: C%d topic %d: ready_gen changed since it looked: wake one (rule 3)\n", c, t);
						n = 1; wake(t, n)
#endif
					:: else -> skip
					fi
				}
				t = 0; ret = 0;
				rg_win[c] = 0; rg_zero[c] = 0; rg_dirty[c] = 0;
				SLEEP_IF(zz)
			}
		:: else -> skip
		fi
	:: else -> skip
	fi
}

/*
 * aw_claim_leave(unused) -> aw_waiter_leave(): off every queue, the wakes
 * of the topics in its inbox or in unused passed on, unregistered (a topic
 * nobody waits on any more loses its next fence).  No pulse slots are
 * modelled, so no topic records the claimer as its spender here, and the
 * release that follows (aw_set_spender_release) has nothing to give the
 * worker.
 */
inline leave(unused)
{
	atomic {
		/* G9 "exactly one waiter per row": it passes on only wakes it was given */
		g9_spurious = ((unused & ~woke) != 0);
		assert(!g9_spurious);
		woke = 0;
		printf("MSC: C%d leaves (inbox %d, unused %d)\n", c, w_in[c], unused);
		w_q[c] = 0;
		for (t : 0 .. NT - 1) {
			if
			:: (w_top[c] & B(t)) && ((w_in[c] | unused) & B(t)) ->
#ifndef MUTANT_L5
				printf("MSC: C%d passes on the wake of topic %d (rule 2)\n", c, t);
				pass_on(t)
#else
				printf("MSC: C%d passes no wake on (L5)\n", c)
#endif
			:: else -> skip
			fi
		}
		t = 0;
		w_reg[c] = 0; w_in[c] = 0;
		for (t : 0 .. NT - 1) {
			if
			:: !REG_ON(t) -> drop_entry(t)
			:: else -> skip
			fi
		}
		t = 0; unused = 0; ready = 0
	}
}

/*
 * COMMIT of a claim's transaction: the rows' new versions visible and
 * their locks released, then the callbacks (aw_ledger_commit only
 * clears the record's open_pid, which the model does not need: a record's
 * token names its claim); the sums: the lease's fence to the worker
 * (aw_waiters_fence_hint), rows locked and not taken wake one claimer each
 */
inline claim_commit()
{
	d_step {
		xm = 0;
		for (i : 0 .. NR - 1) {
			if
			:: lockr[i] == c && u_claim[i] ->
				c_ft[i] = u_ft[i]; c_lu[i] = u_lu[i]; c_tok[i] = u_tok[i]
			:: lockr[i] == c -> xm = xm | B(TOP(i))
			:: else -> skip
			fi;
			if
			:: lockr[i] == c ->
				lockr[i] = 0; u_claim[i] = false; u_ex[i] = false; u_ft[i] = 0; u_lu[i] = 0; u_tok[i] = 0
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: C%d COMMIT claim\n", c)
	};
	atomic {
		fence_hint(TOP(cl_row[c]), fen);
		for (t : 0 .. NT - 1) {
			if
			:: (xm & B(t)) -> n = 1; wake(t, n)
			:: else -> skip
			fi
		}
		t = 0; xm = 0;
		h_row[c] = cl_row[c]; h_tok[c] = cl_tok[c];
		cl_row[c] = 0; cl_tok[c] = 0; fen = 0;
		busy[c] = false; TSH_OFF
	}
}

/*
 * ROLLBACK of a claim's transaction: the locks released, then the
 * callbacks: aw_ledger_rollback (set lock), and the rows claimed or
 * locked are claimable again: one wake each (waiter lock); one step, as
 * for a settle's release
 */
inline claim_rollback()
{
	d_step {
		xm = 0;
		for (i : 0 .. NR - 1) {
			if
			:: lockr[i] == c ->
				xm = xm | B(TOP(i));
				lockr[i] = 0; u_claim[i] = false; u_ex[i] = false; u_ft[i] = 0; u_lu[i] = 0; u_tok[i] = 0
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: C%d ROLLBACK claim\n", c)
	};
	atomic {
		if
		:: rec_tok[cl_row[c]] == cl_tok[c] ->
			rec_tok[cl_row[c]] = 0; rec_end[cl_row[c]] = 0;
			printf("MSC: C%d the lease of row %d released by the rollback\n", c, cl_row[c])
		:: else -> skip
		fi;
		for (t : 0 .. NT - 1) {
			if
			:: (xm & B(t)) ->
#ifndef MUTANT_L7
				n = 1; wake(t, n)
#else
				printf("MSC: C%d claim rolled back: no wake (L7)\n", c)
#endif
			:: else -> skip
			fi
		}
		t = 0; xm = 0;
		cl_row[c] = 0; cl_tok[c] = 0; fen = 0;
		busy[c] = false; TSH_OFF
	}
}


#ifdef HAND
/*
 * The zero-gap hand-off, by claimer 2 (src/outbox.c, src/claim.c,
 * src/xact.c): BEGIN; complete(), fail() or park() of its lease; maybe a
 * second settle of the same lease (fail() again, or dead_letter(): the
 * token still matches, the transaction's own write keeps it); then
 * claim(topic, 2) (or next_rows => 2); COMMIT or ROLLBACK.  The claim
 * first reserves a slot for the settled lease (aw_topic_reserve_handed:
 * its record still there, not handed yet, the topic not over its limit),
 * then the free ones for the rest, in the same hold of the set lock
 * (aw_limits_reserve, aw_ledger_reserve); it may take the
 * settled row itself again (a re-take: the transaction's own write made
 * it visible).  Its first new lease is paired with the settled one (they
 * hold one slot until both are over), unless it is the re-take of that
 * row, whose new record replaces the settled one's: that one is kept
 * (rt_*) and put back if the transaction rolls back.
 *
 * MUTANT_L8 (the code before): the settled-leases list names the lease
 * once per settle, so the second settle makes the claim reserve a second
 * handed slot.  MUTANT_L9 (the code before): the re-take's record drops
 * the settled one as an ended lease, and the rollback puts back nothing.
 */
inline handoff()
{
	atomic {
		c == 2 && (role & R_HAND) &&
		ncl < maxcl && h_tok[c] != 0 && lockr[h_row[c]] == 0 && c_ex[h_row[c]] &&
		c_tok[h_row[c]] == h_tok[c] && TL_FREE ->
		ncl++; busy[c] = true; TSH_ON;
		r = h_row[c];
		s_row[c] = r; s_tok[c] = c_tok[r]; sold = c_ft[r]; snow = now;
		lockr[r] = c; u_claim[r] = false; u_tok[r] = c_tok[r];
		if
		:: kind = K_COMPLETE; u_ex[r] = false; u_ft[r] = 0; u_lu[r] = 0
		:: kind = K_FAIL0; u_ex[r] = true; u_ft[r] = now; u_lu[r] = 0
		:: kind = K_FAIL1; u_ex[r] = true; u_ft[r] = now + 1; u_lu[r] = 0
		fi;
		st_n = 1;
		printf("MSC: C%d BEGIN; settle row %d (%d: 1 complete, 2 fail now, 3 fail +1), its fence was %d\n", c, r, kind, sold)
	};
	if
	:: atomic {
		/* the same lease settled again in the transaction: fail() again or dead_letter() */
		u_ex[r] ->
		if
		:: kind = K_COMPLETE; u_ex[r] = false; u_ft[r] = 0; u_lu[r] = 0
		:: kind = K_FAIL0; u_ft[r] = now; u_lu[r] = 0
		fi;
#ifdef MUTANT_L8
		st_n = 2;
		printf("MSC: C%d settles row %d again (%d): the settled list names it twice (L8)\n", c, r, kind)
#else
		/* idempotent per (key, token): the list names the lease once */
		printf("MSC: C%d settles row %d again (%d): already in the settled list\n", c, r, kind)
#endif
	   }
	:: skip
	fi;
	d_step {
		/*
		 * claim(topic, 2) (the topic lock is held since the settle):
		 * aw_limits_reserve(): aw_waiters_ready_gen(), then one hold of the
		 * set lock, the handed slot first (aw_topic_reserve_handed)
		 */
		cnow = now;
		rg_win[c] = 1; rg_dirty[c] = 0;
		if
		:: REG_ON(0) -> rg_zero[c] = 0
		:: else -> rg_zero[c] = 1
		fi;
		hd = 0; allow = 0;
		if
		:: lim[0] > 0 ->
			used(0, v);
			if
			:: v <= lim[0] && rec_tok[r] == s_tok[c] && pr_pred == 0 -> hd = st_n
			:: else -> skip
			fi;
			rsvd[0] = rsvd[0] + hd; hding = hd;
			used(0, v);
			if
			:: v < lim[0] -> allow = lim[0] - v;
				if
				:: allow > 2 - hd -> allow = 2 - hd
				:: else -> skip
				fi
			:: else -> skip
			fi;
			rsvd[0] = rsvd[0] + allow;
			allow = allow + hd;
			ret = allow;        /* reserved, to be used or given back */
			v = 0
		:: lim[0] == 0 && !UNLOADED(0) -> allow = 2
		:: else -> skip
		fi;
		printf("MSC: C%d claim(t, 2): %d handed, may take %d (reserved %d)\n", c, hd, allow, rsvd[0])
	};
	d_step {
		/* the claim statement: up to allow visible rows, oldest fence first; its own write is visible to it */
		nl = 0;
		do
		:: allow > 0 ->
			v = NR;
			for (i : 0 .. NR - 1) {
				if
				:: (nl & B(i)) == 0 &&
				   ((lockr[i] == 0 && c_ex[i] && c_ft[i] <= cnow) ||
				    (lockr[i] == c && !u_claim[i] && u_ex[i] && u_ft[i] <= cnow)) &&
				   (v == NR || (lockr[i] == c -> u_ft[i] : c_ft[i]) < (lockr[v] == c -> u_ft[v] : c_ft[v])) -> v = i
				:: else -> skip
				fi
			}
			i = 0;
			if
			:: v == NR -> break
			:: else -> skip
			fi;
			GCAP_GRANT(0);
			if
			:: lockr[v] == 0 -> lockr[v] = c; u_ex[v] = true
			:: else -> skip
			fi;
			t = v; new_tok(t, n); t = 0;
			fen = cnow + LEASE;
			u_claim[v] = true; u_ft[v] = cnow + LEASE; u_lu[v] = cnow + LEASE; u_tok[v] = n;
			ntk[v] = n; n = 0;
			nl = nl | B(v);
			printf("MSC: C%d claim: leases row %d until %d (token %d)\n", c, v, cnow + LEASE, ntk[v]);
			allow--
		:: else -> break
		od;
		v = 0
	};
	d_step {
		/* aw_ledger_open(): records, the first paired with the settled lease; unused back */
		gotm = 0;
		for (i : 0 .. NR - 1) {
			if
			:: (nl & B(i)) && lim[0] > 0 ->
				rsvd[0]--; ret--;
				if
				:: i == r && rec_tok[i] == s_tok[c] ->
#ifndef MUTANT_L9
					rt_row = i + 1; rt_tok = rec_tok[i]; rt_end = rec_end[i];
					printf("MSC: C%d re-take of row %d: the settled lease's record kept for a rollback\n", c, i)
#else
					printf("MSC: C%d re-take of row %d: the settled lease's record dropped as ended (L9)\n", c, i)
#endif
				:: else -> skip
				fi;
				rec_tok[i] = ntk[i]; rec_end[i] = cnow + LEASE;
				if
				:: hd > 0 && gotm == 0 && i != r && rec_tok[r] == s_tok[c] && pr_pred == 0 ->
					pr_pred = r + 1; pr_succ = i + 1;
					printf("MSC: C%d the lease of row %d takes the slot of row %d's (paired)\n", c, i, r)
				:: else -> skip
				fi;
				gotm = 1
			:: (nl & B(i)) -> gotm = 1
			:: else -> skip
			fi
		}
		i = 0; gotm = 0; hding = 0;
		/* reserved and not used: back (aw_ledger_unreserve; rule 3 below) */
		rsvd[0] = rsvd[0] - ret;
		hd = 0; allow = 0
	};
	atomic {
		if
		:: ret > 0 &&
		   (((rg_zero[c] != 0) != !REG_ON(0)) || (REG_ON(0) && rg_dirty[c])) ->
			printf("MSC: C%d gives back %d unused, ready_gen changed: wake one (rule 3)\n", c, ret);
			n = 1; wake(0, n)
		:: else -> skip
		fi;
		ret = 0; rg_win[c] = 0; rg_zero[c] = 0; rg_dirty[c] = 0; cnow = 0
	};
	if
	:: handoff_commit()
	:: (role & R_RB) -> handoff_rollback()
	fi
}

inline handoff_commit()
{
	d_step {
		for (i : 0 .. NR - 1) {
			if
			:: lockr[i] == c && u_claim[i] ->
				c_ex[i] = true; c_ft[i] = u_ft[i]; c_lu[i] = u_lu[i]; c_tok[i] = u_tok[i]
			:: lockr[i] == c && !u_claim[i] ->
				c_ex[i] = u_ex[i];
				if
				:: u_ex[i] -> c_ft[i] = u_ft[i]; c_lu[i] = u_lu[i]
				:: else -> c_ft[i] = 0; c_lu[i] = 0; c_tok[i] = 0
				fi
			:: else -> skip
			fi;
			if
			:: lockr[i] == c ->
				lockr[i] = 0; u_claim[i] = false; u_ex[i] = false; u_ft[i] = 0; u_lu[i] = 0; u_tok[i] = 0
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: C%d COMMIT hand-off\n", c)
	};
	atomic {
		/* the settle's record(s), in order: aw_ledger_release() */
		v = 0;
		if
		:: rec_tok[r] == s_tok[c] && pr_pred == r + 1 ->
			rec_tok[r] = 0; rec_end[r] = 0; pr_pred = 0; pr_succ = 0;
			printf("MSC: C%d the settled lease of row %d: its slot passed to its successor\n", c, r)
		:: rec_tok[r] == s_tok[c] && pr_pred != r + 1 ->
			rec_tok[r] = 0; rec_end[r] = 0; v = 1;
			printf("MSC: C%d releases the lease of row %d\n", c, r)
		:: else -> printf("MSC: C%d releases nothing (no record of token %d)\n", c, s_tok[c])
		fi;
		if
		:: v == 1 -> n = 1; wake(0, n)
		:: else -> skip
		fi;
		v = 0;
		/* a re-take's kept record: its settle committed, the lease is over */
		rt_row = 0; rt_tok = 0; rt_end = 0;
		/* the sums: the settled row made claimable or fenced; the new leases' fence */
		if
		:: (nl & B(r)) == 0 && kind == K_FAIL0 -> n = 1; wake(0, n)
		:: (nl & B(r)) == 0 && kind == K_FAIL1 -> fence_hint(0, snow + 1)
		:: else -> skip
		fi;
		if
		:: nl != 0 -> fence_hint(0, fen)
		:: else -> skip
		fi;
		fen = 0;
		/* it goes on with the first new lease; any other it lets expire */
		h_row[c] = 0; h_tok[c] = 0;
		for (i : 0 .. NR - 1) {
			if
			:: (nl & B(i)) && h_tok[c] == 0 -> h_row[c] = i; h_tok[c] = ntk[i]
			:: else -> skip
			fi;
			ntk[i] = 0
		}
		i = 0; nl = 0; st_n = 0;
		s_row[c] = 0; s_tok[c] = 0; sold = 0; snow = 0; kind = 0; r = 0;
		busy[c] = false; TSH_OFF
	}
}

inline handoff_rollback()
{
	d_step {
		for (i : 0 .. NR - 1) {
			if
			:: lockr[i] == c ->
				lockr[i] = 0; u_claim[i] = false; u_ex[i] = false; u_ft[i] = 0; u_lu[i] = 0; u_tok[i] = 0
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: C%d ROLLBACK hand-off\n", c)
	};
	atomic {
		/* aw_ledger_rollback(): the new leases' records (a pair ends: the settled one keeps its slot) */
		for (i : 0 .. NR - 1) {
			if
			:: (nl & B(i)) && rec_tok[i] == ntk[i] ->
				rec_tok[i] = 0; rec_end[i] = 0;
				if
				:: pr_succ == i + 1 -> pr_pred = 0; pr_succ = 0
				:: else -> skip
				fi
			:: else -> skip
			fi
		}
		i = 0;
		/* the re-take's kept record back: the settled lease is live again */
		if
		:: rt_row != 0 && rec_tok[rt_row - 1] == 0 ->
			rec_tok[rt_row - 1] = rt_tok; rec_end[rt_row - 1] = rt_end;
			printf("MSC: C%d puts back the record of row %d's lease\n", c, rt_row - 1)
		:: rt_row != 0 && rec_tok[rt_row - 1] != 0 ->
			/* claimed by another since: that lease had ended; its slot was released then */
			skip
		:: else -> skip
		fi;
		rt_row = 0; rt_tok = 0; rt_end = 0;
		/* the settle's undo: rule 1 */
		if
		:: sold <= now -> n = 1; wake(0, n)
		:: else -> skip
		fi;
		/* the rows it claimed are claimable again: one wake each */
		for (i : 0 .. NR - 1) {
			if
			:: (nl & B(i)) -> n = 1; wake(0, n)
			:: else -> skip
			fi;
			ntk[i] = 0
		}
		i = 0; nl = 0; st_n = 0; fen = 0;
		s_row[c] = 0; s_tok[c] = 0; sold = 0; snow = 0; kind = 0; r = 0;
		busy[c] = false; TSH_OFF
	}
}
#endif

proctype claimer(byte c; byte maxcl; byte role)
{
	byte ncl = 0;           /* claims made */
	byte r = 0;
	byte i = 0;
	byte t = 0;
	byte v = 0;
	byte n = 0;
	byte opn = 0;           /* topics with slots to give */
	byte cnow = 0;          /* the clock at the claim */
	byte fen = 0;           /* the lease's end */
	byte got = 0;           /* the row leased + 1 */
	byte gotm = 0;
	byte ret = 0;           /* topics whose reservation went back */
	byte ready = 0;
	byte unused = 0;
	byte xm = 0;
	byte kind = 0;
	byte sold = 0;          /* the settled row's fence before the call */
	byte snow = 0;          /* the clock at the settle */
	byte woke = 0;          /* the topics of the wakes its last probe answered */
#ifdef HAND
	byte allow = 0;         /* the rows its hand-off claim may take */
#endif

end:	do
	:: d_step {
		/*
		 * claim(wait => ...): aw_waiter_register() (the first waiter of a
		 * topic makes its entry, next fence unknown), then the first
		 * ResetLatch() and aw_waiter_rearm(): it probes all its topics
		 */
		(role & R_WAIT) && ncl < maxcl && h_tok[c] == 0 ->
		ncl++; busy[c] = true;
		for (t : 0 .. NT - 1) {
			if
			:: (w_top[c] & B(t)) && !REG_ON(t) -> new_entry(t)
			:: else -> skip
			fi
		}
		t = 0;
		w_reg[c] = w_top[c]; w_q[c] = w_top[c]; w_in[c] = 0;
		ready = w_top[c];
		woke = 0;
		printf("MSC: C%d claim(wait): registered on topics %d, probes\n", c, w_top[c])
	   };
		do
		:: /* aw_claim_probe(): the ready topics first, then the others */
			claim_once(ready, ready == w_top[c]);
			unused = ready & ~gotm;
#ifndef MUTANT_F9
			/* only the wakes it was given: not the topics of a first probe (4d60e4c) */
			unused = unused & woke;
#endif
			if
			:: got == 0 && ready != w_top[c] -> claim_once(w_top[c] & ~ready, true)
			:: else -> skip
			fi;
			if
			:: got != 0 -> break
			:: else ->
				/* asleep (SLEEP_IF): woken, or the wait ends */
				if
				:: d_step {
					/* its latch set: ResetLatch(); aw_waiter_rearm(); probe the ready topics */
					w_in[c] != 0 ->
					w_sleep[c] = false; busy[c] = true;
					ready = w_in[c]; w_in[c] = 0; w_q[c] = w_top[c];
					woke = ready;
					printf("MSC: C%d woken: probe (ready %d)\n", c, ready)
				   }
#ifdef DEADLINE
				:: d_step {
					/* the wait's end: aw_claim_leave(unused) */
					/* after a probe that found nothing: its wakes are spent */
					w_sleep[c] = false; busy[c] = true; unused = 0;
					printf("MSC: C%d wait ends\n", c)
				   } -> break
#endif
				:: d_step {
					/* cancel: aw_claim_leave(0) in PG_CATCH */
					w_sleep[c] = false; busy[c] = true; unused = 0;
					printf("MSC: C%d cancelled\n", c)
				   } -> break
				fi
			fi
		od;
		leave(unused);
		if
		:: got != 0 -> claim_commit()
		:: got != 0 && (role & R_RB) -> claim_rollback()
		:: else -> d_step { busy[c] = false; TSH_OFF }
		fi;
		got = 0; gotm = 0
	:: d_step {
		/* claim() without waiting, in a transaction that commits or rolls back */
		(role & R_NOWAIT) && ncl < maxcl && h_tok[c] == 0 -> ncl++; busy[c] = true; printf("MSC: C%d claim\n", c)
	   };
		claim_once(w_top[c], false);
		if
		:: got != 0 -> claim_commit()
		:: got != 0 && (role & R_RB) -> claim_rollback()
		:: else -> d_step { busy[c] = false; TSH_OFF }
		fi;
		got = 0; gotm = 0
	:: d_step {
		/* the row is gone or claimed again: a settle would return false and do nothing */
		h_tok[c] != 0 && (!c_ex[h_row[c]] || c_tok[h_row[c]] != h_tok[c]) ->
		h_row[c] = 0; h_tok[c] = 0
	   }
	:: d_step {
		/* abandon the lease: it expires */
		h_tok[c] != 0 ->
		printf("MSC: C%d abandons its lease of row %d\n", c, h_row[c]); h_row[c] = 0; h_tok[c] = 0
	   }
	:: atomic {
		/*
		 * complete(), fail() or park() with the lease token: the statement
		 * locks the row (waiting while another holds it) and returns its
		 * topic, token and fence before the call (aw_read_settled);
		 * aw_record_settled() records the lease it ends
		 */
		(role & R_SETTLE) && h_tok[c] != 0 && lockr[h_row[c]] == 0 && c_ex[h_row[c]] &&
		c_tok[h_row[c]] == h_tok[c] && TL_FREE ->
		r = h_row[c];
		busy[c] = true; TSH_ON;
		s_row[c] = r; s_tok[c] = c_tok[r]; sold = c_ft[r]; snow = now;
		lockr[r] = c; u_claim[r] = false; u_tok[r] = c_tok[r];
		if
		:: kind = K_COMPLETE; u_ex[r] = false; u_ft[r] = 0; u_lu[r] = 0
		:: kind = K_FAIL0; u_ex[r] = true; u_ft[r] = now; u_lu[r] = 0
		:: kind = K_FAIL1; u_ex[r] = true; u_ft[r] = now + 1; u_lu[r] = 0
#ifdef PARK
		:: kind = K_PARK; u_ex[r] = true; u_ft[r] = now + PARKB; u_lu[r] = 0
#endif
		fi;
		printf("MSC: C%d settle row %d (%d: 1 complete, 2 fail now, 3 fail +1, 4 park), its fence was %d\n",
		       c, r, kind, sold)
	   };
		if
		:: d_step {
			/* COMMIT: the row's new version visible, the lock released ... */
			c_ex[r] = u_ex[r];
			if
			:: u_ex[r] -> c_ft[r] = u_ft[r]; c_lu[r] = u_lu[r]
			:: else -> c_ft[r] = 0; c_lu[r] = 0; c_tok[r] = 0
			fi;
			lockr[r] = 0; u_claim[r] = false; u_ex[r] = false; u_ft[r] = 0; u_lu[r] = 0; u_tok[r] = 0;
			printf("MSC: C%d COMMIT settle of row %d\n", c, r)
		   };
			/*
			 * ... then the callback: the record, aw_ledger_release() (set
			 * lock), then the wakes (waiter lock); one step: between the two
			 * the slot is free, which a claim that looks then can only use
			 */
			atomic {
#ifndef MUTANT_L1
				if
				:: rec_tok[r] == s_tok[c] ->
#else
				if
				:: rec_tok[r] != 0 ->
#endif
					rec_tok[r] = 0; rec_end[r] = 0;
					v = 1;
					printf("MSC: C%d releases the lease of row %d\n", c, r)
				:: else ->
					v = 0;
					printf("MSC: C%d releases nothing (no record of token %d)\n", c, s_tok[c])
				fi;
				/*
				 * a released slot wakes one claimer (after complete and fail
				 * a pulse of one slot, spent by the one claimer it wakes)
				 */
				if
				:: v == 1 -> n = 1; wake(TOP(r), n)
				:: else -> skip
				fi;
				v = 0;
				/* then the sums: aw_xact_record_visibility() of fail() and park() */
				if
				:: kind == K_FAIL0 -> n = 1; wake(TOP(r), n)
				:: kind == K_FAIL1 -> fence_hint(TOP(r), snow + 1)
				:: kind == K_PARK -> fence_hint(TOP(r), snow + PARKB)
				:: else -> skip
				fi;
				h_row[c] = 0; h_tok[c] = 0;
				s_row[c] = 0; s_tok[c] = 0; sold = 0; snow = 0; kind = 0; r = 0;
				busy[c] = false; TSH_OFF
			}
		:: d_step {
			/* ROLLBACK: the lock released, the lease goes on */
			(role & R_RB) ->
			lockr[r] = 0; u_claim[r] = false; u_ex[r] = false; u_ft[r] = 0; u_lu[r] = 0; u_tok[r] = 0;
			printf("MSC: C%d ROLLBACK settle of row %d\n", c, r)
		   };
			atomic {
				/* the SETTLE record's undo: a lease that had ended leaves its row claimable (rule 1) */
				if
				:: sold <= now ->
#ifndef MUTANT_L4
					printf("MSC: C%d the lease had ended: wake one (rule 1)\n", c);
					n = 1; wake(TOP(r), n)
#else
					printf("MSC: C%d the lease had ended: no wake (L4)\n", c)
#endif
				:: else -> skip
				fi;
				s_row[c] = 0; s_tok[c] = 0; sold = 0; snow = 0; kind = 0; r = 0;
				busy[c] = false; TSH_OFF
			}
		fi
#ifdef HAND
	:: handoff()
#endif
	:: else -> break
	od
}

/* ------------------------------------------------------------------
 * The worker (src/worker.c): lease ends (aw_limits_expire) and its look
 * at fences that passed (aw_worker_check_fences)
 * ------------------------------------------------------------------ */

#define DUE(t)  (REG_ON(t) && (nf[t] == 0 || nf[t] <= now))
#if NT == 1
#define ANY_DUE DUE(0)
#else
#define ANY_DUE (DUE(0) || DUE(1))
#endif

active proctype worker()
{
	byte i = 0;
	byte t = 0;
	byte n = 0;
	byte x0 = 0;
	byte x1 = 0;
	byte vis = 0;
	byte wnow = 0;
	byte nx = 0;
	byte v = 0;

end:	do
	:: atomic {
		/*
		 * aw_ledger_expire(): every record whose end has passed (set
		 * lock); then each wakes one blocked claimer of its topic (waiter
		 * lock); one step, as for a settle's release
		 */
		ANY_ROW(EXPIRABLE) ->
		w_busy = true;
		for (i : 0 .. NR - 1) {
			if
			:: EXPIRABLE(i) ->
#ifdef HAND
				if
				:: pr_pred == i + 1 || pr_succ == i + 1 ->
					/* one lease of a hand-off pair: the other keeps the slot */
					pr_pred = 0; pr_succ = 0
				:: !(pr_pred == i + 1 || pr_succ == i + 1) && hding > 0 &&
				   i == s_row[2] && rec_tok[i] == s_tok[2] ->
					/* a handed reservation shared its slot: it holds one of its own now */
					hding--; x0++
				:: !(pr_pred == i + 1 || pr_succ == i + 1) &&
				   !(hding > 0 && i == s_row[2] && rec_tok[i] == s_tok[2]) ->
#endif
				if
				:: TOP(i) == 0 -> x0++
				:: else -> x1++
				fi
#ifdef HAND
				fi
#endif
				;
				rec_tok[i] = 0; rec_end[i] = 0;
				printf("MSC: W the lease of row %d ends: released\n", i)
			:: else -> skip
			fi
		}
		i = 0;
#ifndef MUTANT_L6
		n = x0; wake(0, n);
#if NT == 2
		n = x1; wake(1, n);
#endif
#else
		printf("MSC: W no wake for the leases released (L6)\n");
#endif
		x0 = 0; x1 = 0;
		w_busy = false
	   }
	:: atomic {
		/*
		 * aw_waiters_due_fences() (waiter lock): a topic with waiters whose
		 * next fence is unknown or passed: checking, a new hint window.
		 * Then the count of its rows whose fence passed since the last look
		 * (checked_upto < fence <= now), up to the number of its waiters (a
		 * statement; one step with the above: a commit between the two
		 * finds checking set and wakes by itself)
		 */
		ANY_DUE ->
		w_busy = true;
		if
		:: DUE(0) -> t = 0
#if NT == 2
		:: DUE(1) -> t = 1
#endif
		fi;
		ckg[t] = true; hs[t] = NOEND; w_lt = t + 1;
		wnow = now; vis = 0;
		for (i : 0 .. NR - 1) {
			if
			:: TOP(i) == t && c_ex[i] && c_ft[i] <= wnow && c_ft[i] > chk[t] && vis < NWAIT(t) -> vis++
			:: else -> skip
			fi
		}
		i = 0;
		printf("MSC: W looks at topic %d (next fence %d, checked up to %d): %d new\n", t, nf[t], chk[t], vis)
	   };
#ifndef MUTANT_F8
		/*
		 * rows became claimable: aw_waiters_mark_ready() (waiter lock), a
		 * readiness event that wakes nobody, before the free slots are
		 * read (a6347ee): a claim whose reservation the next step counts,
		 * and which gives it back unused, then wakes one (rule 3)
		 */
		atomic {
			if
			:: vis > 0 && REG_ON(t) -> gen_event(t); printf("MSC: W marks topic %d ready\n", t)
			:: else -> skip
			fi
		};
#endif
		/* of a limited topic, only as many as it has free slots (aw_ledger_free_slots, set lock) */
		d_step {
			if
			:: lim[t] > 0 ->
				used(t, v);
				if
				:: v >= lim[t] -> nx = 0
				:: else -> nx = lim[t] - v
				fi;
				if
				:: vis > nx -> vis = nx; printf("MSC: W topic %d: only %d free slot(s)\n", t, nx)
				:: else -> skip
				fi;
				v = 0; nx = 0
			:: else -> skip
			fi
		};
		/*
		 * the next fence ahead (a statement), then aw_waiters_fence_result()
		 * (waiter lock) on the topic's entry, if any (it may be a new one):
		 * next fence = min(the one found, hint_since), checked up to the
		 * look's now, no longer checking
		 */
		atomic {
			nx = NOEND;
			for (i : 0 .. NR - 1) {
				if
				:: TOP(i) == t && c_ex[i] && c_ft[i] > wnow && c_ft[i] < nx -> nx = c_ft[i]
				:: else -> skip
				fi
			}
			i = 0;
			if
			:: REG_ON(t) ->
				nf[t] = (nx < hs[t] -> nx : hs[t]);
				chk[t] = wnow; ckg[t] = false;
				printf("MSC: W topic %d: next fence %d, wakes %d\n", t, nf[t], vis)
			:: else -> skip
			fi;
			/* hint_since is reset by the next due_fences before it is read again */
			nx = 0; wnow = 0; hs[t] = NOEND; w_lt = 0
		};
		atomic {
			/* then aw_waiters_wake(visible), a lock hold of its own */
			n = vis; vis = 0;
			wake(t, n);
			t = 0;
			w_busy = false
		}
	od
}


#ifdef SETLIM
#ifndef NEWLIM
#define NEWLIM  1
#endif
/*
 * The operator (src/limits.c): one transaction, READ COMMITTED or
 * REPEATABLE READ (whose snapshot its first statement takes), of
 * set_limit(t, NEWLIM), or set_limit(t, NULL); set_limit(t, NEWLIM); then
 * COMMIT or ROLLBACK.  set_limit() takes the topic lock exclusively (it
 * waits for the claims and settles of the topic to end, and new ones wait
 * for it) and holds it to the end.  Just before the commit, with the lock
 * held, a topic the set holds no limit of has its live leases counted
 * from leased_until with a fresh snapshot, whatever the isolation level;
 * at commit the limits row becomes visible and the callback applies the
 * transaction's last call alone: a topic that had no limit takes in the
 * leases counted, one that had keeps its records; the claimers the new
 * free slots can take are woken.  Count and apply are one step here:
 * between the two the lock keeps every claim and settle of the topic out.
 *
 * MUTANT_L10 (the code before): each call is applied in turn at commit:
 * the removal drops every lease record, then the new limit is applied to
 * the empty list (the second call counted nothing: the topic was still
 * limited in the set when it ran).
 * MUTANT_L11 (the code before): under REPEATABLE READ the count uses the
 * transaction's snapshot, which misses a claim committed after it.
 */
proctype operator()
{
	byte i = 0;
	byte n = 0;
	byte v = 0;
	byte f = 0;
	bool two = false;
	bool rr = false;
#ifdef MUTANT_L11
	byte snap_lu[NR];
	byte snap_tok[NR];
#endif

	if
	:: d_step { op_busy = true; printf("MSC: O BEGIN\n") }
	:: d_step {
		op_busy = true; rr = true;
#ifdef MUTANT_L11
		for (i : 0 .. NR - 1) {
			if
			:: c_ex[i] -> snap_lu[i] = c_lu[i]; snap_tok[i] = c_tok[i]
			:: else -> skip
			fi
		}
		i = 0;
#endif
		printf("MSC: O BEGIN REPEATABLE READ; its snapshot\n")
	   }
	fi;
	atomic {
		/* set_limit(): aw_lock_topic(AccessExclusiveLock) */
		NO_SHARERS && !tex ->
		tex = true;
		if
		:: two = false; printf("MSC: O set_limit(t, %d): the topic lock\n", NEWLIM)
		:: two = true; printf("MSC: O set_limit(t, NULL); set_limit(t, %d): the topic lock\n", NEWLIM)
		fi
	};
	if
	:: atomic {
		/* the count (pre-commit), COMMIT, the callback's apply */
		f = lim[0];
#ifdef MUTANT_L10
		if
		:: two && lim[0] > 0 ->
			for (i : 0 .. NR - 1) { rec_tok[i] = 0; rec_end[i] = 0 }
			i = 0;
			lim[0] = 0;
			printf("MSC: O COMMIT: the removal drops every record, then %d applies to none (L10)\n", NEWLIM)
		:: else
#else
		if
		:: else
#endif
			-> if
			:: lim[0] == 0 ->
				for (i : 0 .. NR - 1) {
					if
#ifdef MUTANT_L11
					:: rr && snap_lu[i] > now ->
						rec_tok[i] = snap_tok[i]; rec_end[i] = snap_lu[i]
					:: rr && snap_lu[i] <= now -> skip
					:: !rr && c_ex[i] && c_lu[i] > now -> rec_tok[i] = c_tok[i]; rec_end[i] = c_lu[i]
#else
					:: c_ex[i] && c_lu[i] > now -> rec_tok[i] = c_tok[i]; rec_end[i] = c_lu[i]
#endif
					:: else -> skip
					fi
				}
				i = 0;
				printf("MSC: O COMMIT: counts the live leases (rr %d), applies limit %d\n", rr, NEWLIM)
			:: else -> printf("MSC: O COMMIT: limit %d applies, the records kept\n", NEWLIM)
			fi
		fi;
		lim[0] = NEWLIM; dlim[0] = NEWLIM;
		gcap[0] = (GLIVE(0) > NEWLIM -> GLIVE(0) : NEWLIM);
		/* wake the claimers the new free slots can take */
		used(0, v);
		if
		:: v < NEWLIM -> n = NEWLIM - v
		:: else -> n = 0
		fi;
		if
		:: f > 0 && f < NEWLIM -> n = (n > NEWLIM - f -> NEWLIM - f : n)
		:: f >= NEWLIM -> n = 0
		:: else -> skip
		fi;
#ifdef MUTANT_L10
		if
		:: two && f > 0 -> n = 3
		:: else -> skip
		fi;
#endif
		v = 0; f = 0;
		wake(0, n);
		tex = false; op_busy = false
	   }
	:: d_step {
		printf("MSC: O ROLLBACK\n");
		tex = false; op_busy = false
	   }
	fi;
#ifdef MUTANT_L11
	for (i : 0 .. NR - 1) { snap_lu[i] = 0; snap_tok[i] = 0 }
#endif
	i = 0; two = false; rr = false
}
#endif

#ifdef LOAD
/*
 * After a restart (shared memory new) the set holds no limit: the worker
 * loads this database's limits (src/limits.c) in a short transaction of
 * its own, the topic lock taken exclusively, each limited topic with its
 * live leases counted from leased_until; then every waiter of the topic
 * is woken.  The load may fail (the cluster-wide topic table is full):
 * the database stays not loaded, the load is retried, and meanwhile a
 * claim of a topic whose aion_wake.limits row says it is limited takes
 * nothing (fail closed, a WARNING and a counter).
 *
 * MUTANT_L12 (the code before): a failed load marks the database loaded
 * anyway, and the topic's claims are not limited until the next restart.
 */
proctype loader()
{
	byte i = 0;
	byte n = 0;

end:	do
	:: atomic {
		!loaded && NO_SHARERS && !tex ->
		if
		:: for (i : 0 .. NR - 1) {
				if
				:: c_ex[i] && c_lu[i] > now -> rec_tok[i] = c_tok[i]; rec_end[i] = c_lu[i]
				:: else -> skip
				fi
			}
			i = 0;
			lim[0] = dlim[0]; loaded = true;
			printf("MSC: L the limits loaded, every waiter woken\n");
			n = 3; wake(0, n)
		:: printf("MSC: L the topic table is full: the load fails\n");
#ifdef MUTANT_L12
			loaded = true;
			printf("MSC: L ... marked loaded anyway: topic 0 unlimited, every waiter woken (L12)\n");
			n = 3; wake(0, n)
#else
			skip
#endif
		fi
	   }
	:: loaded -> break
	od
}
#endif

/* the clock */
active proctype clock()
{
end:	do
	:: now < TMAX -> d_step { now++; printf("MSC: T clock %d\n", now) }
	:: else -> break
	od
}

/* ------------------------------------------------------------------
 * Properties
 * ------------------------------------------------------------------ */

#define WOKEN(k)    (w_sleep[k] && w_in[k] != 0)
#ifdef SETLIM
#define OP_IDLE     (!op_busy)
#else
#define OP_IDLE     true
#endif
#ifdef LOAD
#define LOAD_DONE   loaded
#else
#define LOAD_DONE   true
#endif
#define QUIESCENT   (!busy[1] && !busy[2] && !busy[3] && !WOKEN(1) && !WOKEN(2) && !WOKEN(3) && \
                     !w_busy && !ANY_ROW(EXPIRABLE) && !ANY_DUE && OP_IDLE && LOAD_DONE)
#define FREE(t)     (lim[t] == 0 || LIVE(t) < lim[t])
#define STRANDED_K(k, t) (w_sleep[k] && (w_top[k] & B(t)) && FREE(t) && CLAIMABLE(t))
#if NT == 1
#define STRANDED_ANY (STRANDED_K(1, 0) || STRANDED_K(2, 0) || STRANDED_K(3, 0))
#define G8_LIMIT    (dlim[0] == 0 || GLIVE(0) <= gcap[0])
#define BOOKS(t)    (lim[t] == 0 || (rsvd[t] == 0 && NREC(t) == LIVE(t)))
#define G8_BOOKS    BOOKS(0)
#else
#define STRANDED_ANY (STRANDED_K(1, 0) || STRANDED_K(2, 0) || STRANDED_K(3, 0) || \
                      STRANDED_K(1, 1) || STRANDED_K(2, 1) || STRANDED_K(3, 1))
#define G8_LIMIT    ((dlim[0] == 0 || GLIVE(0) <= gcap[0]) && (dlim[1] == 0 || GLIVE(1) <= gcap[1]))
#define BOOKS(t)    (lim[t] == 0 || (rsvd[t] == 0 && NREC(t) == LIVE(t)))
#define G8_BOOKS    (BOOKS(0) && BOOKS(1))
#endif
#define STRANDED    (QUIESCENT && STRANDED_ANY)
#define BOOKS_WRONG (QUIESCENT && !G8_BOOKS)

/* each monitor names its property in the assertion spin prints */
bool g8_over = false;
bool g8_books_wrong = false;
bool g8_slot_stranded = false;

active proctype g8_limit()
{
end:	atomic { !G8_LIMIT -> g8_over = true; assert(!g8_over) }
}

active proctype g8_books()
{
end:	atomic { BOOKS_WRONG -> g8_books_wrong = true; assert(!g8_books_wrong) }
}

active proctype g8_stranded()
{
end:	atomic { STRANDED -> g8_slot_stranded = true; assert(!g8_slot_stranded) }
}

init
{
	byte r;

	atomic {
		for (r : 0 .. NR - 1) {
			c_ex[r] = true;
			c_ft[r] = 0
		}
#ifdef LATE1
		c_ft[1] = 1;
#endif
#ifdef LOAD
		/* before the restart claimer 2 leased row 0 */
		c_ft[0] = LEASE; c_lu[0] = LEASE; c_tok[0] = 1;
		h_row[2] = 0; h_tok[2] = 1;
#endif
		r = 0;
		hs[0] = NOEND;
#if NT == 2
		hs[1] = NOEND;
#endif
		dlim[0] = LIMIT;
		gcap[0] = (LIMIT == 0 -> NOEND : LIMIT);
#ifndef LOAD
		lim[0] = LIMIT;
#endif
#if NT == 2
		lim[1] = LIMIT1;
		dlim[1] = LIMIT1;
		gcap[1] = (LIMIT1 == 0 -> NOEND : LIMIT1);
		w_top[1] = 3; w_top[2] = 1; w_top[3] = 2;
#else
		w_top[1] = 1; w_top[2] = 1; w_top[3] = 1;
#endif
#ifdef SETLIM
		run operator();
#endif
#ifdef LOAD
		run loader();
#endif
		run claimer(1, MAXCL1, ROLE1);
		run claimer(2, MAXCL2, ROLE2);
#if NC == 3
		run claimer(3, MAXCL3, ROLE3)
#endif
	}
}
