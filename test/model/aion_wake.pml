/*
 * aion_wake.pml -- a Promela model of how aion_wake parks rows and spends
 * capacity pulses, checked by spin (run it with test/model/run.sh; what is
 * modelled and what is not is in test/model/README.md).
 *
 * Why: G2 (no lost wake) and G3 (one writer per row) of doc/design.md are about
 * interleavings -- a pulse landing while a park is pending, a park racing a
 * re-offer, a rollback racing the worker -- that SQL tests hit only by luck.
 * Here spin tries every interleaving of two dispatchers, the worker, a pulse
 * source and a clock (and, with WAITER, a claimer blocked on the topic) over
 * one topic and NR rows, and checks:
 *
 *   G3  the worker never takes an entry whose fence is not committed, and
 *       its compare-and-set only moves the committed fence version it took,
 *       with no other writer holding the row (asserts in take_one and in
 *       the worker's CAS step).
 *   G2a every slot of every pulse is always somewhere: the topic counter, a
 *       credit, an entry holding it (woken pending, due), a take of the
 *       worker or the claimer; it leaves only by moving a row or by its
 *       credit expiring (monitor g2_conserved).
 *   G2b in a quiescent state (no transaction open, the worker idle with
 *       nothing to spend) there is never a live credit beside a row whose
 *       committed state is parked with its fence still ahead: that slot is
 *       stranded, the credit expires and the row sleeps out its fence
 *       (monitor g2_stranded).  With WAITER, quiescent means nobody awake
 *       (the worker's latch, a retry timer, the claimer woken, in a probe or
 *       leaving), and unspent slots on the counter, or a due entry, strand
 *       as a credit does: a pulse handed to a claimer that then left
 *       without spending it must still reach the worker.
 *   and no deadlock (spin's invalid end state check).
 *
 * Each atomic step is one hold of the set lock, one SQL statement or one
 * commit, mirroring src/parked_set.c, src/pulse_spend.c, src/xact.c,
 * src/reoffer.c and src/outbox.c; comments name the C function.  A commit makes the row's
 * new version visible and releases its lock first; the COMMIT/ABORT
 * callback (confirm, abandon, forget) is a later step, as in PostgreSQL
 * (CallXactCallbacks runs after ProcArrayEndTransaction).
 *
 * The model follows the code as of commit 48c0d86, which has the fixes of the findings F1-F7 this model made
 * (README.md): a forget removes only the entry of the generation its
 * statement saw under the row lock (F1); a re-offer that finds its row
 * locked keeps the slot on the entry, now DUE with a retry time (F2); a
 * rollback of park() puts back, as CONFIRMED, the row's previous park,
 * which park()'s own UPDATE reads from the row it locks, whatever the set
 * held (F3, F4, F5, F7); an entry put back takes a live credit and becomes
 * DUE, as its confirm would have (F6).  Since ac5398d and 8293a0a a
 * committed pulse() is handed to a claimer blocked on the topic rather than
 * waking the worker, and a claimer that leaves with the topic's work
 * unspent wakes the worker: that is modelled with WAITER (below).
 *
 * Since the zero-gap hand-off (1.1) a claimer spends a pulse handed
 * to it, and complete()/fail() with next_rows the slot their settle
 * frees, inside the claim: aw_claim_spend() runs claiming rounds of
 * aw_reoffer_step() (r.claim set, slot_cap, own_slots) that take the
 * topic's due and oldest CONFIRMED entries under the set lock (never a
 * pending one; aw_take_topic marks pending entries woken and makes credit
 * only in a plain round) and move each row straight from its parked fence
 * to a lease for the caller in one compare-and-set UPDATE (aw_cas_plan
 * with claim; aw_claim_parked_row), settled at once (aw_set_finish_round) and,
 * if the transaction rolls back, undone (aw_set_undo_take).  The model's
 * claimer does this, and with NEXT_ROWS so does dispatcher 1.  It found
 * F10, F11 and F12 in that code (README.md, "The direct hand-off"): the
 * code now has the fixes of F10 and F11 (FINDING_F10 and FINDING_F11 model
 * it without them); FIX_F12 is the fix proposed for F12.  Since 3a95bdd
 * and c65800e the topic records its one spender (q_spender, hand_step1..3,
 * spender_release); since 170c957 the hand-off's own slot that moved no
 * row goes back to the caller; modelling that found F13 (FIX_F13).
 *
 * Options (spin -D...):
 *   NR=2          two rows instead of one (a much larger state space)
 *   TMAX, NPULSE, MAXOPS1, MAXOPS2   bounds, see below
 *   NULL_TOKEN    park() and fail() are called without a lease_token, so
 *                 any dispatcher may write any claimed row
 *   NO_RETOUCH    a lease holder writes (park, fail) only a row that is not
 *                 parked: the plain claim -> park flow, no re-park and no
 *                 fail/complete of a row that is parked
 *   WAITER        one claim(wait) blocked on the topic, and the worker's
 *                 latch: a committed pulse() and a confirm that makes an
 *                 entry due are handed to the claimer if it is queued,
 *                 which the set records as the topic's one spender
 *                 (aw_waiters_wake_spender, three steps), else wake the
 *                 worker; only the spender's rounds take the topic's
 *                 slots and due entries; the claimer
 *                 spends a slot by claiming the oldest confirmed park
 *                 straight from its fence (aw_claim_probe ->
 *                 aw_claim_once -> aw_claim_spend, a claiming
 *                 reoffer_round), or leaves without (cancelled after the
 *                 wake, or it found a row mid-probe); after each probe and
 *                 when it leaves it releases the record, waking the
 *                 worker if the topic has slots or due entries left.
 *   NEXT_ROWS     dispatcher 1 may also call complete(another row,
 *                 next_rows => 1) (a row outside the model, whose freed
 *                 slot is spent on the oldest confirmed park, claimed
 *                 straight from its fence: aw_claim_next with
 *                 spend_parked), and its fail() may carry next_rows => 1
 *                 (the same, after the fail in the same statement); a
 *                 freed slot no take used goes to a visible row (there or
 *                 not) or is a pulse of one slot at commit; the complete
 *                 may also be next_rows => 0 (the slot is that pulse), or
 *                 come in a REPEATABLE READ transaction whose snapshot was
 *                 taken before (parks may commit in between); a rollback
 *                 undoes the hand-off, and the entry of a row whose take
 *                 used the settle's slot comes back CONFIRMED, without a
 *                 slot (it takes a live credit, as any entry put back)
 *   FINDING_F10   the code before F10's fix: a park that confirms on a
 *                 topic that still holds pulse slots (a claiming round left
 *                 them on the counter) wakes no spender for them, and (as
 *                 before the spender record) the release wakes no worker
 *   FINDING_F11   the code before F11's fix: a take also takes the entry
 *                 of a row the taker's own transaction settled, finds it
 *                 stale and drops it
 *   FIX_F12       aw_set_undo_take replaces an entry of another fence that
 *                 is not pending, where the code keeps any entry it finds
 *   FIX_F13       an entry the hand-off's own slot took and gave back
 *                 (aw_set_finish_round: its row locked) or moved (aw_set_undo_take
 *                 after a rollback) comes back CONFIRMED and takes a live
 *                 credit, as any entry put back; the code takes none
 * Mutants, each must be rejected:
 *   MUTANT_M1     park() enters the set as CONFIRMED before its fence
 *                 commits (no pending state)
 *   MUTANT_M2     the re-offer updates the row without comparing its fence
 *   MUTANT_M3     slots left after step 1 are dropped (no woken mark, no
 *                 credit)
 *   MUTANT_M4     a re-offer that finds its row locked gives the slot back
 *                 to the counter and the round skips the entry (the code
 *                 before e274fa3: finding F2)
 *   MUTANT_M5     a rollback of park() puts back what the set held, not
 *                 the row's previous park: a confirmed, due or in-flight
 *                 entry, or another transaction's pending entry if that
 *                 transaction committed; the pending entry of one that
 *                 rolled back is dropped (the code of 7fea0b6: finding F7)
 *   MUTANT_M6     an entry put back by a rollback does not take a live
 *                 credit (the code before 7fea0b6: finding F6)
 *   MUTANT_M7     (with WAITER) the release (aw_set_spender_release, after
 *                 a probe and on leaving) does not wake the worker for the
 *                 slots or due entries its spender left
 *   MUTANT_M8     a claiming round (the hand-off, settle-and-claim) also
 *                 takes PENDING entries: it hands out a park that may not
 *                 have committed
 *   MUTANT_M9     a claiming round's UPDATE does not compare the parked
 *                 fence (nor parked_at, nor that the fence is ahead)
 *   MUTANT_M10    (NEXT_ROWS) the hand-off's compare-and-set and SELECT
 *                 read through a REPEATABLE READ snapshot: a park
 *                 committed after it looks stale and its entry is dropped
 *   MUTANT_M11    (NEXT_ROWS) the code before 170c957: the entry of a
 *                 locked oldest park keeps the hand-off's own slot (DUE;
 *                 a stale one gives it to the counter), and the hand-off,
 *                 having moved nothing, still leases a visible row (or
 *                 sends the pulse): one slot, two rows (G7, g7_twice)
 *   MUTANT_M12    (NEXT_ROWS) next_rows => 0 sends no pulse: the freed
 *                 slot vanishes
 *   MUTANT_M13    (NEXT_ROWS) a rolled-back hand-off puts the entry back
 *                 DUE, holding the slot of the settle that never committed
 *   MUTANT_M14    (WAITER) the worker ignores the recorded spender: its
 *                 plain rounds spend the topic's slots while the claimer
 *                 they were handed to holds some (one spender, g_two)
 *   MUTANT_M15    (WAITER) a spender is live whether or not its claimer
 *                 is still registered (not rejected: the leave always
 *                 releases the record after unregistering; run.sh does
 *                 not check it, README.md)
 *   MUTANT_M16    (WAITER) the hand sets the claimer's latch in the
 *                 registry step, before the set records it as spender
 *
 * Copyright (c) 2026, aion_wake authors
 */

#ifndef NR
#define NR      1       /* rows (1 or 2), one topic */
#endif
#ifndef MAXOPS1
#define MAXOPS1 3       /* claims, parks and fails of dispatcher 1 */
#endif
#ifndef MAXOPS2
#define MAXOPS2 2       /* ... of dispatcher 2 */
#endif
#ifndef NPULSE
#define NPULSE  2       /* pulses sent */
#endif
#ifndef KSLOTS
#define KSLOTS  1       /* slots per pulse */
#endif
#ifndef TMAX
#define TMAX    3       /* the clock stops here */
#endif
#define BACKOFF 2       /* park(), fail(): fence = clock + BACKOFF */
#define LEASE   2       /* claim(): fence = clock + LEASE */
#define CREDIT  1       /* a credit is live while now < credit_until */

/* entry states (AwState), plus NONE for "no entry of this key" */
#define NONE      0
#define PENDING   1
#define CONFIRMED 2
#define DUE       3
#define INFLIGHT  4

/* lock holders: 0 free, 1..2 dispatchers, WORKER, the blocked claimer */
#define WORKER  3
#define WAITER_H 4

/*
 * who runs a re-offer round: the worker (0), with WAITER a blocked claimer
 * (1), with NEXT_ROWS dispatcher 1's settle-and-claim (2)
 */
#define TD      2
#if defined(NEXT_ROWS)
#define NT      3
#elif defined(WAITER)
#define NT      2
#else
#define NT      1
#endif
#define TK(t, r)  ((t) * NR + (r))

/* re-offer outcomes (AwTakeOutcome) */
#define O_NONE   0
#define O_MOVED  1
#define O_LOCKED 2
#define O_STALE  3

/*
 * Versions and generations are small numbers handed out canonically (the
 * smallest one nothing refers to), so that two histories reaching the same
 * situation are one state for spin.
 */

/* ---- clock ---- */
byte now = 0;

/* ---- the durable row (aion_wake.outbox): committed state ---- */
byte c_ver[NR];         /* version of the committed row: identifies its fence */
byte c_ft[NR];          /* visible_after */
bool c_parked[NR];      /* parked_at IS NOT NULL */
byte c_tok[NR];         /* lease_token: the dispatcher that claimed it last */
short c_mask[NR];       /* ghost: bit v set while version v is a committed one */
/* ---- the durable row: row lock and uncommitted write ---- */
byte lockr[NR];         /* holder of the row lock, 0 when free */
byte u_ver[NR];
byte u_ft[NR];
bool u_parked[NR];
byte u_tok[NR];
#if NR == 2
byte c_pat[NR];         /* parked_at (orders the FIFO) */
byte u_pat[NR];
#endif

/* ---- the parked set: one entry per key (AwEntry) ---- */
byte e_state[NR];
byte e_gen[NR];         /* generation */
byte e_ver[NR];         /* the fence it parked (by version) ... */
byte e_ft[NR];          /* ... and its time */
bool e_woken[NR];
byte e_owner[NR];       /* pending: the dispatcher parking it */
bool e_retry[NR];       /* DUE after a locked re-offer, retry_at not reached */
#ifdef MUTANT_M4
bool e_skip[NR];        /* skip_round == this round (the old code) */
#endif
#if NR == 2
byte e_pat[NR];         /* parked_at */
byte last_seq = 0;      /* the row whose entry got the newest seq */
#endif

/* ---- the topic (AwTopic) ---- */
byte slots = 0;         /* pulse counter */
byte credit = 0;
byte credit_until = 0;
bool in_work = false;   /* on the worker's work list */

#if NR == 2
#define any_row(x)  (x(0) || x(1))
#else
#define any_row(x)  (x(0))
#endif
#define is_due(r)   (e_state[r] == DUE)
#define due_now(r)  (e_state[r] == DUE && !e_retry[r])

/* ---- the takes (AwTake[]) of the worker, TK(0, r), and the claimer, TK(1, r) ---- */
bool tk_valid[NT * NR];
byte tk_gen[NT * NR];
byte tk_ver[NT * NR];
byte tk_out[NT * NR];

/* ---- each dispatcher's transaction (index 1, 2) ---- */
bool busy[3];           /* inside a transaction or its callback */
byte d_row[3];
byte d_gen[3];          /* the generation its park made */
bool d_sv_valid[3];     /* the entry its park replaced (AwSavedEntry) */
byte d_sv_ver[3];
byte d_sv_ft[3];
#if NR == 2
byte d_sv_pat[3];
#endif
byte d_fgen[3];         /* claim, fail: generation to forget at commit (0: none) */
bool w_busy = false;    /* the worker is in a round */

#ifdef WAITER
/* ---- WAITER: the worker's latch and one claimer blocked on the topic ---- */
bool w_latch = false;   /* the worker's latch is set (aw_wake_worker) */
bool q_reg = false;     /* registered (aw_waiter_register .. aw_waiter_leave) */
bool q_queued = false;  /* on the topic's queue: a wake can take it */
bool q_ready = false;   /* a wake took it (its latch is set) */
bool q_busy = false;    /* in a probe, leaving, or its transaction not yet committed */
bool p_hand = false;    /* a committed pulse(): slots added, the hand-off not yet done */
/*
 * The topic's recorded spender (AwTopic.spender_procno/registration): the
 * claimer, or nobody (the worker).  A record of a claimer that has left
 * the registry is no spender (aw_topic_spender_live; MUTANT_M15 ignores
 * the registration).  q_late: the record was made after the claimer read
 * aw_set_last_hand() for its probe, so the release after that probe
 * leaves it (the hand's latch makes it probe again).
 */
bool q_spender = false;
bool q_late = false;
#ifndef MUTANT_M15
#define spender_live  (q_spender && q_reg)
#else
#define spender_live  q_spender
#endif
#define WAKE_WORKER   w_latch = true
#else
#define WAKE_WORKER   skip
#define spender_live  false
#endif
/*
 * aw_topic_may_spend(): only the spender's rounds take the topic's slots
 * and due entries: the live claimer's claiming rounds, else the worker's
 * plain rounds (cap 0); any other claiming round (the claimer while it is
 * not the spender, the settle-and-claim) spends only its own slots.
 * MUTANT_M14: the worker ignores the record.
 */
#ifndef MUTANT_M14
#define MAY_SPEND(t, cap) (spender_live -> (t == 1) : (cap == 0))
#else
#define MAY_SPEND(t, cap) ((cap == 0) || (spender_live && t == 1))
#endif
/* ghost: the taker (+ 1) whose takes hold slots of the counter or of due entries */
byte g_spending = 0;
bool g_two = false;

/* ---- ghosts ---- */
byte g_live = 0;        /* slots received, not yet spent on a moved row or expired */
byte pulses = 0;

#ifdef NEXT_ROWS
/*
 * Dispatcher 1's settle-and-claim: the slot its settle frees (its "own"
 * slot) is spent once -- by a take of its claiming round (it is then a
 * live slot: on the entry, back on the counter, or spent on the row it
 * moved), or on a visible row the claim leases, or, when the claim takes
 * nothing, as a pulse of one slot at commit.  g7_twice: one freed slot
 * brought back two rows (G7).
 */
byte d_own = 0;         /* the row (+ 1) whose take used the own slot */
bool d_vis = false;     /* a visible row was leased with it */
bool d_pulse = false;   /* the commit sends a pulse of one slot (the code) */
bool d_owed = false;    /* ghost: the freed slot is owed as that pulse */
bool g7_twice = false;
#define d_spent (d_own != 0 || d_vis)
/*
 * d_rr: dispatcher 1's transaction is REPEATABLE READ and took its
 * snapshot before the settle-and-claim.  With MUTANT_M10 the hand-off's
 * compare-and-set and SELECT read through that snapshot (s_*: each row's
 * committed state when it was taken).
 */
bool d_rr = false;
#ifdef MUTANT_M10
byte s_ver[NR];
byte s_ft[NR];
bool s_parked[NR];
#endif
#endif

#define committed(r, v)   ((c_mask[r] & (1 << (v))) != 0)
#define credit_live       (credit > 0 && now < credit_until)
/* aw_entry_holds_slot() */
#define holds_slot(r)     ((e_state[r] == PENDING && e_woken[r]) || e_state[r] == DUE)

/* does a take of row r refer to version (generation) x? */
#define TK_REF1(t, r, a, x) (tk_valid[TK(t, r)] && x == a[TK(t, r)])
#if NT == 3
#define TK_REFS(r, a, x) \
	(TK_REF1(0, r, a, x) || TK_REF1(1, r, a, x) || TK_REF1(2, r, a, x))
#elif NT == 2
#define TK_REFS(r, a, x) (TK_REF1(0, r, a, x) || TK_REF1(1, r, a, x))
#else
#define TK_REFS(r, a, x) TK_REF1(0, r, a, x)
#endif

#if defined(NEXT_ROWS) && defined(MUTANT_M10)
#define SNAP_REF(r, v) (d_rr && v == s_ver[r])
#else
#define SNAP_REF(r, v) false
#endif

/* is version v of row r referred to by anything? */
#define ver_used(r, v) \
	(v == c_ver[r] || (lockr[r] != 0 && v == u_ver[r]) || \
	 (e_state[r] != NONE && v == e_ver[r]) || TK_REFS(r, tk_ver, v) || \
	 (busy[1] && d_row[1] == r && d_sv_valid[1] && v == d_sv_ver[1]) || \
	 (busy[2] && d_row[2] == r && d_sv_valid[2] && v == d_sv_ver[2]) || SNAP_REF(r, v))
#define gen_used(r, g) \
	((e_state[r] != NONE && g == e_gen[r]) || TK_REFS(r, tk_gen, g) || \
	 (busy[1] && d_row[1] == r && (g == d_gen[1] || g == d_fgen[1])) || \
	 (busy[2] && d_row[2] == r && (g == d_gen[2] || g == d_fgen[2])))

/* a new version of row r, in v; it is not committed (yet) */
inline new_ver(r, v)
{
	v = 1;
	do
	:: ver_used(r, v) -> v++
	:: else -> break
	od;
	c_mask[r] = c_mask[r] & ~(1 << v)
}

/* a new generation for an entry of row r, in g */
inline new_gen(r, g)
{
	g = 1;
	do
	:: gen_used(r, g) -> g++
	:: else -> break
	od
}

/* commit the uncommitted write of row r */
inline commit_row(r)
{
	c_ver[r] = u_ver[r]; c_ft[r] = u_ft[r]; c_parked[r] = u_parked[r];
	c_tok[r] = u_tok[r]; c_mask[r] = c_mask[r] | (1 << u_ver[r]);
#if NR == 2
	c_pat[r] = (u_parked[r] -> u_pat[r] : 0);
#endif
	release_row(r)
}

inline release_row(r)
{
	lockr[r] = 0;
	u_ver[r] = 0; u_ft[r] = 0; u_parked[r] = false; u_tok[r] = 0;
#if NR == 2
	u_pat[r] = 0;
#endif
}

/* ------------------------------------------------------------------
 * Parked set operations (src/parked_set.c, src/pulse_spend.c).  Each is one hold of the set
 * lock: callers wrap them in d_step.
 * ------------------------------------------------------------------ */

#ifdef MUTANT_M4
#define clear_skip(r) e_skip[r] = false
#define skipped(r)    e_skip[r]
#else
#define clear_skip(r) skip
#define skipped(r)    false
#endif

/* aw_topic_add_slots(t, 1) */
inline give_back_slot()
{
	slots++;
	in_work = true
}

#ifdef WAITER
/*
 * aw_waiters_wake_spender() (src/waiters.c) after a committed pulse() or a
 * confirm that made an entry due, in three steps (hs, the caller's: the
 * step to run next, 0 when done):
 *   the set (aw_set_spender_active): a live spender will spend it: stop;
 *   the registry, under the waiter lock: the queued claimer is taken off
 *     the queue (its inbox bit set, its latch not yet); nobody queued:
 *     aw_wake_worker();
 *   the set (aw_set_spender_hand): the claimer, if still registered, is
 *     recorded as the spender (unless it already is), then its latch is
 *     set; if it left in between, the worker is woken (the code tries the
 *     next waiter: there is none here, so aw_anyone_waits() is false).
 * MUTANT_M16: the claimer's latch is set in the registry step, before the
 * record.
 */
inline hand_step1(hs)
{
	if
	:: spender_live ->
		hs = 0;
		printf("MSC:    ... the claimer is the spender already\n")
	:: else -> hs = 2
	fi
}

inline hand_step2(hs)
{
	if
	:: q_queued ->
		q_queued = false; hs = 3;
#ifdef MUTANT_M16
		q_ready = true;
#endif
		printf("MSC:    ... the blocked claimer taken off the queue\n")
	:: else ->
		WAKE_WORKER; hs = 0;
		printf("MSC:    ... nobody queued: wake the worker\n")
	fi
}

inline hand_step3(hs)
{
	if
	:: q_reg ->
		if
		:: !spender_live -> q_spender = true; q_late = q_busy
		:: else -> skip
		fi;
#ifndef MUTANT_M16
		q_ready = true;
#endif
		printf("MSC:    ... recorded as the spender (late %d), its latch set (not with M16)\n", q_late)
	:: else ->
		WAKE_WORKER;
		printf("MSC:    ... the claimer left: wake the worker\n")
	fi;
	hs = 0
}

/*
 * aw_set_spender_release(): after a probe (all: false; a topic recorded
 * late is left) and when it leaves (all: true), the claimer stops being
 * the spender; what is left goes to the worker.  MUTANT_M7 and
 * FINDING_F10: the worker is not woken.
 */
inline spender_release(all)
{
	if
	:: q_spender && (all || !q_late) ->
		q_spender = false; q_late = false;
#if !defined(MUTANT_M7) && !defined(FINDING_F10)
		if
		:: slots > 0 || any_row(is_due) -> WAKE_WORKER; printf("MSC: Q release: the topic has work: wake the worker\n")
		:: else -> printf("MSC: Q release\n")
		fi
#else
		printf("MSC: Q release, the worker is not woken (M7/F10)\n")
#endif
	:: else -> skip
	fi
}
#endif

/* aw_entry_remove(e, give_back) */
inline entry_remove(r, give_back)
{
	if
	:: give_back && holds_slot(r) -> give_back_slot()
	:: else -> skip
	fi;
	e_state[r] = NONE;
	e_gen[r] = 0; e_ver[r] = 0; e_ft[r] = 0;
	e_woken[r] = false; e_owner[r] = 0; e_retry[r] = false;
	clear_skip(r)
}

/* a new seq (and parked_at) for the entry of row r */
#if NR == 2
#define new_seq(r, pat) e_pat[r] = pat; last_seq = r
#else
#define new_seq(r, pat) skip
#endif

/*
 * aw_set_park(): replace any entry of the key with a pending one, which
 * inherits a wake the old one held (woken pending, due).  Nothing of the
 * set is saved for a rollback: what a rollback puts back is the row's
 * previous park, which park()'s UPDATE read (d_sv_*, set in the park step).
 * The code saves the pending entry of an earlier park of the same
 * transaction, to put it back as pending at ROLLBACK TO SAVEPOINT; a
 * transaction here makes one call, so that case does not arise.
 *
 * MUTANT_M5, the code of 7fea0b6: save instead what the set held -- a
 * confirmed, due or in-flight entry, or the pending entry of another
 * transaction (which has ended, since this one holds the row lock, but
 * whose COMMIT or ABORT callback may not have run) only if that
 * transaction committed (TransactionIdDidCommit(owner_xid)); the pending
 * entry of one that rolled back is dropped.  Its owner committed exactly
 * when the entry's fence version is committed.  (That code read the entry
 * and the commit log under a shared hold of the set lock before the
 * exclusive one; one step here loses no behaviour: the owner's outcome
 * cannot change in between, and only its callback can change the entry.)
 */
inline set_park(r, d)
{
	if
	:: e_state[r] != NONE ->
		inherit = holds_slot(r);
#ifdef MUTANT_M5
		/* M5 (the code of 7fea0b6): save from the set, not the row */
		d_sv_valid[d] = (e_state[r] != PENDING || committed(r, e_ver[r]));
		if
		:: d_sv_valid[d] ->
			d_sv_ver[d] = e_ver[r];
			d_sv_ft[d] = e_ft[r];
#if NR == 2
			d_sv_pat[d] = e_pat[r];
#endif
		:: else ->
			d_sv_ver[d] = 0; d_sv_ft[d] = 0;
#if NR == 2
			d_sv_pat[d] = 0;
#endif
			printf("MSC: D%d set: drop the pending entry of D%d (fence v%d never committed) (M5)\n",
			       d, e_owner[r], e_ver[r])
		fi
#else
		printf("MSC: D%d set: replaces the entry of fence v%d (state %d)\n", d, e_ver[r], e_state[r])
#endif
	:: else ->
		inherit = false;
#ifdef MUTANT_M5
		d_sv_valid[d] = false; d_sv_ver[d] = 0; d_sv_ft[d] = 0;
#if NR == 2
		d_sv_pat[d] = 0;
#endif
#endif
		skip
	fi;
	new_gen(r, tmp);
	d_gen[d] = tmp;
	e_gen[r] = tmp;
	e_woken[r] = inherit;
	e_owner[r] = d;
	e_ver[r] = u_ver[r];
	e_ft[r] = u_ft[r];
	e_retry[r] = false;
	clear_skip(r);
	new_seq(r, now);
#ifdef MUTANT_M1
	/* M1: no pending state -- the entry is confirmed before its fence commits */
	e_owner[r] = 0;
	if
	:: inherit -> e_state[r] = DUE; e_woken[r] = false; in_work = true
	:: else -> e_state[r] = CONFIRMED
	fi;
	printf("MSC: D%d set: entry gen %d for fence v%d CONFIRMED at once (M1)\n", d, tmp, e_ver[r]);
#else
	e_state[r] = PENDING;
	printf("MSC: D%d set: entry gen %d for fence v%d, pending (inherits a wake %d; a rollback puts back fence v%d %d)\n",
	       d, tmp, e_ver[r], inherit, d_sv_ver[d], d_sv_valid[d]);
#endif
	inherit = false; tmp = 0
}

/* aw_set_confirm(): COMMIT callback of park() */
inline set_confirm(r, d)
{
	if
	:: e_state[r] == PENDING && e_gen[r] == d_gen[d] ->
		inherit = e_woken[r];
		if
		:: !inherit && credit_live ->
			credit--; inherit = true;
			if
			:: credit == 0 -> credit_until = 0
			:: else -> skip
			fi
		:: else -> skip
		fi;
		e_woken[r] = false;
		e_owner[r] = 0;
		if
		:: inherit -> e_state[r] = DUE; in_work = true;
#ifdef WAITER
			hand = true;    /* after the set lock: aw_waiters_wake_spender() */
#endif
			printf("MSC: D%d set: confirm gen %d: woken or credit, entry due\n", d, d_gen[d])
		:: else -> e_state[r] = CONFIRMED;
#if defined(WAITER) && !defined(FINDING_F10)
			/*
			 * slots the topic still holds are spent on it now: a claimer
			 * handed them may have found it pending (F10's fix)
			 */
			if
			:: slots > 0 -> hand = true
			:: else -> skip
			fi;
#endif
			printf("MSC: D%d set: confirm gen %d: entry confirmed\n", d, d_gen[d])
		fi
	:: else -> printf("MSC: D%d set: confirm gen %d: not found\n", d, d_gen[d])
	fi;
	inherit = false
}

/*
 * aw_entry_put_confirmed(), as a restore calls it: an entry that is pending
 * or in flight, or already has the saved fence, is left alone; anything
 * else is replaced by a CONFIRMED entry with the saved fence.  Then
 * aw_set_abandon() lets the new entry take a live credit, as the confirm it
 * replaced may have missed doing: it becomes DUE (retry_at 0) and puts the
 * topic on the work list.
 */
inline put_confirmed(r, d)
{
	if
	:: e_state[r] == PENDING || e_state[r] == INFLIGHT ||
	   (e_state[r] != NONE && e_ver[r] == d_sv_ver[d]) -> skip
	:: else ->
		new_gen(r, tmp);
		e_gen[r] = tmp;
		tmp = 0;
		e_state[r] = CONFIRMED;
		e_woken[r] = false;
		e_owner[r] = 0;
		e_ver[r] = d_sv_ver[d];
		e_ft[r] = d_sv_ft[d];
		e_retry[r] = false;
		clear_skip(r);
#if NR == 2
		new_seq(r, d_sv_pat[d]);
#endif
		printf("MSC: D%d set: restore the previous park as confirmed, fence v%d\n", d, e_ver[r]);
#ifndef MUTANT_M6
		if
		:: credit_live ->
			credit--;
			if
			:: credit == 0 -> credit_until = 0
			:: else -> skip
			fi;
			e_state[r] = DUE; in_work = true; WAKE_WORKER;
			printf("MSC: D%d set: the restored entry uses a credit: due\n", d)
		:: else -> skip
		fi
#endif
	fi
}

/*
 * aw_set_abandon(): ABORT callback of park(): remove this park's entry
 * (giving a slot it held back to the counter), then, if it removed it or
 * the key has no entry now, put back the row's previous park (the fence
 * park()'s UPDATE read) as confirmed
 */
inline set_abandon(r, d)
{
	if
	:: e_state[r] != NONE && e_state[r] != INFLIGHT && e_gen[r] == d_gen[d] ->
		printf("MSC: D%d set: abandon gen %d (its slot back to the counter %d)\n", d, d_gen[d], holds_slot(r));
#ifdef WAITER
		if
		:: holds_slot(r) -> WAKE_WORKER
		:: else -> skip
		fi;
#endif
		entry_remove(r, true);
		inherit = true      /* removed */
	:: else ->
		printf("MSC: D%d set: abandon gen %d: not found\n", d, d_gen[d]);
		inherit = false
	fi;
	if
	:: d_sv_valid[d] && (inherit || e_state[r] == NONE) -> put_confirmed(r, d)
	:: else -> skip
	fi;
	inherit = false
}

/*
 * aw_set_generation_of(), under the row lock of a claim (of a parked row),
 * fail, complete or dead_letter: the generation to forget at commit
 */
#define generation_of(r) ((e_state[r] != NONE) -> e_gen[r] : 0)

/*
 * aw_set_forget(key, generation): COMMIT callback of that claim or fail:
 * remove the entry only if it is still the one seen, and not in flight
 */
inline set_forget(r, d)
{
	if
	:: d_fgen[d] != 0 && e_state[r] != NONE && e_state[r] != INFLIGHT && e_gen[r] == d_fgen[d] ->
		printf("MSC: D%d set: forget gen %d: entry (fence v%d) removed, its slot back %d\n",
		       d, e_gen[r], e_ver[r], holds_slot(r));
#ifdef WAITER
		if
		:: holds_slot(r) -> WAKE_WORKER
		:: else -> skip
		fi;
#endif
		entry_remove(r, true)
	:: d_fgen[d] != 0 && !(e_state[r] != NONE && e_state[r] != INFLIGHT && e_gen[r] == d_fgen[d]) ->
		printf("MSC: D%d set: forget gen %d: not found or in flight\n", d, d_fgen[d])
	:: else -> skip
	fi
}

/* aw_take_entry(), by taker t (who: 'W' the worker, 'Q' the claimer) */
inline take_one(t, who, r)
{
	printf("MSC: %c take row %d, fence v%d (in flight)\n", who, r, e_ver[r]);
	/* G3: never act on a park whose fence is not committed */
	assert(committed(r, e_ver[r]));
	tk_valid[TK(t, r)] = true;
	tk_gen[TK(t, r)] = e_gen[r];
	tk_ver[TK(t, r)] = e_ver[r];
	tk_out[TK(t, r)] = O_NONE;
	e_state[r] = INFLIGHT;
	n++
}

/* the entries of the topic's FIFOs, oldest park (parked_at, seq) first */
#if NR == 2
#define first_row  ((e_pat[1] < e_pat[0] || (e_pat[1] == e_pat[0] && last_seq == 0)) -> 1 : 0)
#define pfirst_row ((last_seq == 0) -> 1 : 0)
#else
#define first_row  0
#define pfirst_row 0
#endif

/*
 * aw_take_topic(), by taker t.  cap == 0: a plain round (the worker, for a
 * topic on the work list): every slot of the topic is spent, on due
 * entries, confirmed entries, pending ones (woken) and as credit.  cap > 0:
 * a claiming round (the hand-off: aw_claim_spend() sets slot_cap and own_slots
 * of aw_reoffer_step(); a claimer handed a pulse, or complete()/fail() with
 * next_rows spending the slot its settle freed): at most cap slots, the
 * caller's own first (own: the freed slot, not a pulse slot of the
 * counter), on due (the spender only) and CONFIRMED entries only; steps 2 and 3 (woken mark,
 * credit) are for plain rounds only ("only a plain round does"), so slots
 * not used stay on the counter, and an own slot not used is not a pulse
 * slot (the caller then claims a visible row, or records a pulse at commit:
 * left out).  A pending entry is never taken (G3).
 */
/*
 * A row the taker's own transaction wrote (it settled it: complete, fail
 * or dead_letter, with next_rows) is left alone: the code skips entries
 * the transaction will forget at commit (aw_xact_will_forget), so a
 * rollback finds the entry where it was (F11's fix).
 */
#ifndef FINDING_F11
#define SETTLED_BY(r, tx) (lockr[r] == (tx))
#else
#define SETTLED_BY(r, tx) false
#endif

/* the own slots are used first: a take with u < o uses one */
#ifdef NEXT_ROWS
#define OWN_TAKE(t, i) \
	if \
	:: t == TD && u < o -> d_own = i + 1 \
	:: else -> skip \
	fi
#else
#define OWN_TAKE(t, i) skip
#endif

inline take_topic(t, who, cap, own, own_tx)
{
	n = 0;
	/*
	 * due entries already hold a slot: one whose fence has passed needs no
	 * re-offer and its slot goes back to the counter (spent below); one
	 * whose row was locked at the last try waits for its retry time
	 */
	for (i : 0 .. NR - 1) {
		if
		:: !MAY_SPEND(t, cap) -> skip   /* not the spender: no due entry */
		:: cap != 0 && n >= cap -> skip
		:: e_state[i] == DUE && e_ft[i] <= now ->
			printf("MSC: %c due entry of row %d: fence passed, its slot back to the counter\n", who, i);
			entry_remove(i, true)
		:: e_state[i] == DUE && e_ft[i] > now && !e_retry[i] && !SETTLED_BY(i, own_tx) -> take_one(t, who, i)
		:: else -> skip
		fi
	}
	/* the slots for confirmed entries: own first (own), then the counter's (k in all) */
	if
	:: cap == 0 -> o = 0; k = (MAY_SPEND(t, cap) -> slots : 0)
	:: else ->
		o = (own < cap - n -> own : cap - n);
		k = o + (MAY_SPEND(t, cap) -> (slots < cap - n - o -> slots : cap - n - o) : 0)
	fi;
	u = 0;
	printf("MSC: %c spend %d slot(s) (%d own)\n", who, k, o);
	/* 1. confirmed entries, oldest park first */
	f = first_row;
	for (j : 0 .. NR - 1) {
		i = (f + j) % NR;
		if
		:: u == k -> break
		:: else -> skip
		fi;
		if
		:: e_state[i] == CONFIRMED && !skipped(i) && !SETTLED_BY(i, own_tx) ->
			if
			:: e_ft[i] <= now -> entry_remove(i, false)    /* fence passed: no slot needed */
			:: else ->
				OWN_TAKE(t, i);
				take_one(t, who, i); u++
			fi
#ifdef MUTANT_M8
		:: cap != 0 && e_state[i] == PENDING ->
			/* M8: the hand-off takes a pending entry (its park may not have committed) */
			printf("MSC: %c takes the PENDING entry of row %d (M8)\n", who, i);
			take_one(t, who, i); u++
#endif
		:: else -> skip
		fi
	}
	/* an own slot used is a live slot from now on (the take holds it) */
	g_live = g_live + (u < o -> u : o);
	/*
	 * ghost: at most one round holds the topic's slots at once: a round
	 * that spends some (a due entry, a counter slot on a confirmed entry,
	 * or, plain, on woken marks and credit) while another round's takes
	 * hold some (MUTANT_M14)
	 */
	if
	:: n > u || u > o || (cap == 0 && k > u) ->
		g_two = (g_spending != 0 && g_spending != t + 1);
		assert(!g_two)
	:: else -> skip
	fi;
	if
	:: n > u || u > o -> g_spending = t + 1
	:: else -> skip
	fi;
	if
	:: cap == 0 && MAY_SPEND(t, cap) ->
		k = k - u;
#ifndef MUTANT_M3
		/* 2. slots left: mark pending parks woken, oldest first */
		f = pfirst_row;
		for (j : 0 .. NR - 1) {
			i = (f + j) % NR;
			if
			:: k == 0 -> break
			:: else -> skip
			fi;
			if
			:: e_state[i] == PENDING && !e_woken[i] ->
				e_woken[i] = true; k--;
				printf("MSC: %c mark the pending entry of row %d woken\n", who, i)
			:: else -> skip
			fi
		}
		/* 3. slots still left become a short-lived credit */
		if
		:: k > 0 ->
			credit = credit + k;
			credit_until = now + CREDIT;
			printf("MSC: %c %d slot(s) become credit\n", who, k)
		:: else -> skip
		fi;
#else
		if
		:: k > 0 -> printf("MSC: %c %d slot(s) dropped (M3)\n", who, k)
		:: else -> skip
		fi;
#endif
		slots = 0
	:: else ->
		/*
		 * t->slots -= used - own: the counter's slots not used stay there
		 * (all of them when the round may not spend them)
		 */
		slots = slots - (u > o -> u - o : 0)
	fi;
	i = 0; j = 0; f = 0; k = 0; u = 0; o = 0;
	/* due entries waiting to be retried keep the topic on the work list */
	in_work = in_work && (slots > 0 || any_row(is_due))
}

/* ------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------ */

/* capacity pulses (pulse() at commit, or NOTIFY): aw_set_add_slots() */
active proctype pulser()
{
#ifdef WAITER
	byte hs = 0;

end:	do
	:: d_step {
		hs == 0 && pulses < NPULSE ->
		pulses++; slots = slots + KSLOTS; g_live = g_live + KSLOTS; in_work = true;
		p_hand = true; hs = 1;
		printf("MSC: P pulse of %d slot(s)\n", KSLOTS)
	   }
	/* after the set lock: a blocked claimer spends it, or the worker */
	:: d_step { hs == 1 -> hand_step1(hs); p_hand = (hs != 0) }
	:: d_step { hs == 2 -> hand_step2(hs); p_hand = (hs != 0) }
	:: d_step { hs == 3 -> hand_step3(hs); p_hand = false }
	:: hs == 0 && pulses >= NPULSE -> break
	od
#else
end:	do
	:: pulses < NPULSE ->
		d_step {
			pulses++; slots = slots + KSLOTS; g_live = g_live + KSLOTS; in_work = true;
			printf("MSC: P pulse of %d slot(s)\n", KSLOTS)
		}
	:: pulses >= NPULSE -> break
	od
#endif
}

/* the clock; a credit past its time is dropped (aw_take_topic resets it) */
active proctype clock()
{
end:	do
	:: now < TMAX ->
		d_step {
			now++;
			printf("MSC: C clock %d\n", now);
			if
			:: credit > 0 && now >= credit_until ->
				g_live = g_live - credit; credit = 0; credit_until = 0;
				printf("MSC: C credit expired\n")
			:: else -> skip
			fi
		}
	:: now >= TMAX -> break
	od
}

/*
 * aw_reoffer_step() rounds, by taker t holding rows as holder (who: 'W' the
 * worker, 'Q' the blocked claimer, 'D' a dispatcher's settle-and-claim;
 * onlist: the worker takes only a topic on the work list, a claimer names
 * its topic): take under the set lock, the compare-and-set UPDATE (row by
 * row, skipping rows others lock), the SELECT that tells locked rows from
 * stale ones, settle under the set lock; again until a take finds nothing.
 *
 * claimer == 0: a plain round (aw_reoffer_round, the worker): the UPDATE
 * pulls the fence forward to now.  claimer != 0: a claiming round
 * (aw_claim_spend(): r.claim set, slot_cap cap0, own_slots own0): the
 * same compare-and-set (visible_after = the fence it took, still ahead,
 * parked_at IS NOT NULL, SKIP LOCKED) moves the row straight from its
 * parked fence to a lease for claimer (aw_cas_plan(true): visible_after =
 * leased_until = the lease end, a new lease_token), and the row is the
 * caller's (aw_claim_parked_row); the rounds end once cap0 rows moved
 * (r->slot_cap reaches 0), and the own slots go to the first round only.
 * The rows it moved stay locked by the caller's transaction until its
 * COMMIT (commit_round()) or ROLLBACK.  A row the caller's own transaction
 * wrote earlier (fail() with next_rows) is seen as that write: no longer
 * parked at its fence, so stale.
 */
/*
 * The hand-off's compare-and-set and SELECT judge a row by its latest
 * committed state, whatever the caller's isolation level.  MUTANT_M10 (the
 * code before that fix): under REPEATABLE READ they read through the
 * transaction's snapshot, so a park committed after it looks stale (the
 * UPDATE matches only a row both the snapshot and the latest version show
 * parked at the fence: otherwise PostgreSQL raises a serialization error).
 */
#if defined(NEXT_ROWS) && defined(MUTANT_M10)
#define SNAP_SEES(t, i) \
	(t != TD || !d_rr || (s_ver[i] == tk_ver[TK(t, i)] && s_parked[i] && s_ft[i] > now))
#else
#define SNAP_SEES(t, i) true
#endif

inline reoffer_round(t, holder, who, onlist, claimer, cap0, own0)
{
	rc = cap0; ro = own0;
	do
	:: d_step {
		/* aw_set_take() */
		if
		:: onlist -> take_topic(t, who, rc, ro, holder)
		:: else -> n = 0
		fi;
		ro = 0
	   };
		if
		:: n == 0 -> break
		:: else -> skip
		fi;
		/* aw_reoffer_execute(): the compare-and-set UPDATE, row by row */
		for (i : 0 .. NR - 1) {
			d_step {
				if
				:: tk_valid[TK(t, i)] && lockr[i] == holder ->
					printf("MSC: %c CAS row %d: its own write (v%d, not parked): no match\n", who, i, u_ver[i])
				:: tk_valid[TK(t, i)] && lockr[i] != 0 && lockr[i] != holder ->
					printf("MSC: %c CAS row %d: locked by %c%d, skipped\n", who, i,
					       (lockr[i] == WAITER_H -> 'Q' : (lockr[i] == WORKER -> 'W' : 'D')), lockr[i])
#ifdef MUTANT_M2
				:: tk_valid[TK(t, i)] && lockr[i] == 0 ->
#elif defined(MUTANT_M9)
				:: tk_valid[TK(t, i)] && lockr[i] == 0 &&
				   (claimer != 0 || (c_ver[i] == tk_ver[TK(t, i)] && c_parked[i] && c_ft[i] > now)) ->
					/* M9: the claiming UPDATE does not compare the parked fence */
#else
				:: tk_valid[TK(t, i)] && lockr[i] == 0 && c_ver[i] == tk_ver[TK(t, i)] && c_parked[i] && c_ft[i] > now &&
				   SNAP_SEES(t, i) ->
#endif
					printf("MSC: %c CAS row %d: moves v%d (it took v%d; 0 to now, else a lease for %d)\n",
					       who, i, c_ver[i], tk_ver[TK(t, i)], claimer);
					/* G3: only the committed fence it parked, still ahead, no other writer */
					assert(lockr[i] == 0 && c_ver[i] == tk_ver[TK(t, i)] && c_parked[i] && c_ft[i] > now);
					lockr[i] = holder;
					new_ver(i, tmp); u_ver[i] = tmp; tmp = 0;
					u_parked[i] = false;
					if
					:: claimer != 0 -> u_ft[i] = now + LEASE; u_tok[i] = claimer
					:: else -> u_ft[i] = now; u_tok[i] = c_tok[i]
					fi;
					tk_out[TK(t, i)] = O_MOVED
				:: tk_valid[TK(t, i)] -> printf("MSC: %c CAS row %d: fence changed or passed, no match\n", who, i)
				:: else -> skip
				fi
			}
		}
		i = 0;
		/* rows not moved but still parked at their fence were locked */
		for (i : 0 .. NR - 1) {
			d_step {
				if
				:: tk_valid[TK(t, i)] && tk_out[TK(t, i)] == O_NONE ->
					if
					:: lockr[i] != holder && c_ver[i] == tk_ver[TK(t, i)] && c_parked[i] && c_ft[i] > now &&
					   SNAP_SEES(t, i) ->
						tk_out[TK(t, i)] = O_LOCKED
					:: else -> tk_out[TK(t, i)] = O_STALE
					fi
				:: else -> skip
				fi
			}
		}
		i = 0;
		/* aw_set_finish_round(); a slot given back or a retry wakes the worker */
		d_step {
			for (i : 0 .. NR - 1) {
				if
				:: tk_valid[TK(t, i)] ->
					if
					:: tk_out[TK(t, i)] == O_MOVED ->
						g_live--;
						mv = mv | (1 << i);
						if
						:: rc > 0 -> rc--
						:: else -> skip
						fi;
						if
						:: e_state[i] == INFLIGHT && e_gen[i] == tk_gen[TK(t, i)] -> entry_remove(i, false)
						:: else -> skip
						fi;
						printf("MSC: %c settle row %d: moved, entry gone\n", who, i)
#if defined(NEXT_ROWS) && !defined(MUTANT_M11)
					:: t == TD && d_own == i + 1 ->
						/*
						 * the hand-off's own slot moved no row: it goes back
						 * to the caller (b->own_left), never to the entry of
						 * a locked row nor to the counter; the caller spends
						 * it on a visible row or as a pulse at commit.  After
						 * a stale row its next round tries it further on.
						 */
						g_live--; d_own = 0;
						if
						:: tk_out[TK(t, i)] == O_STALE -> ro = 1
						:: else -> skip
						fi;
						if
						:: e_state[i] == INFLIGHT && e_gen[i] == tk_gen[TK(t, i)] && tk_out[TK(t, i)] == O_LOCKED ->
							e_state[i] = CONFIRMED;
#ifdef FIX_F13
							/*
							 * F13's proposed fix: like any entry put back, it
							 * takes a live credit (a pulse that found it in
							 * flight left one)
							 */
							if
							:: credit_live ->
								credit--;
								if
								:: credit == 0 -> credit_until = 0
								:: else -> skip
								fi;
								e_state[i] = DUE; e_retry[i] = true; in_work = true; WAKE_WORKER
							:: else -> skip
							fi;
#endif
							printf("MSC: %c settle row %d: locked: entry confirmed (due %d), no slot; the freed slot back to the caller\n", who, i, e_state[i] == DUE)
						:: e_state[i] == INFLIGHT && e_gen[i] == tk_gen[TK(t, i)] ->
							entry_remove(i, false);
							printf("MSC: %c settle row %d: stale: entry dropped; the freed slot back to the caller\n", who, i)
						:: else ->
							printf("MSC: %c settle row %d: not moved, entry replaced meanwhile; the freed slot back to the caller\n", who, i)
						fi
#endif
					:: tk_out[TK(t, i)] == O_LOCKED && e_state[i] == INFLIGHT && e_gen[i] == tk_gen[TK(t, i)] ->
#ifndef MUTANT_M4
						/* the entry keeps its slot: DUE, retried at retry_at */
						e_state[i] = DUE; e_retry[i] = true; in_work = true; WAKE_WORKER;
						printf("MSC: %c settle row %d: locked: the entry keeps its slot, due for a retry\n", who, i)
#else
						/* M4 (the old code): the slot goes back, the round skips the entry */
						give_back_slot(); WAKE_WORKER;
						e_skip[i] = true; e_state[i] = CONFIRMED;
						printf("MSC: %c settle row %d: locked: slot back to the counter, entry confirmed, skipped this round (M4)\n", who, i)
#endif
					:: else ->
						give_back_slot(); WAKE_WORKER;
						if
						:: e_state[i] == INFLIGHT && e_gen[i] == tk_gen[TK(t, i)] ->
							entry_remove(i, false);
							printf("MSC: %c settle row %d: stale: slot back to the counter, entry dropped\n", who, i)
						:: else ->
							printf("MSC: %c settle row %d: not moved, entry replaced meanwhile: slot back to the counter\n", who, i)
						fi
					fi;
					tk_valid[TK(t, i)] = false;
					tk_gen[TK(t, i)] = 0; tk_ver[TK(t, i)] = 0; tk_out[TK(t, i)] = O_NONE
				:: else -> skip
				fi
			}
			i = 0;
			if
			:: g_spending == t + 1 -> g_spending = 0
			:: else -> skip
			fi
		};
		/* a claiming round is done once it moved cap0 rows (r->slot_cap) */
		if
		:: cap0 != 0 && rc == 0 -> break
		:: else -> skip
		fi
	od;
	rc = 0; ro = 0
}

/* COMMIT of the transaction that ran rounds: the rows it moved become visible (or leased) */
inline commit_round(holder, who)
{
	for (i : 0 .. NR - 1) {
		if
		:: lockr[i] == holder ->
			printf("MSC: %c COMMIT: row %d moved (v%d, fence %d)\n", who, i, u_ver[i], u_ft[i]);
			commit_row(i)
		:: else -> skip
		fi
	}
	i = 0;
	mv = 0
}

/*
 * ROLLBACK of a transaction whose claiming rounds moved rows (mv): the rows
 * stay parked at the fence the round took, their locks released; then the
 * ABORT callback, aw_set_undo_take() (src/xact.c), enters each moved row's
 * entry again, unless the key has an entry (a newer park): DUE and holding
 * a slot when its take used a pulse slot, CONFIRMED without one when it
 * used the slot of the settle that rolled back.  One step here: between the two nothing can take the row (it has
 * no entry), and a park or claim of it in between ends as it does after.
 */
/*
 * aw_set_undo_take() links the entry of a row the own slot moved as
 * CONFIRMED and takes no credit; FIX_F13 lets it take a live one, as an
 * entry put back by a rollback of park() does.
 */
#ifdef FIX_F13
#define CREDIT_ON_UNDO true
#else
#define CREDIT_ON_UNDO false
#endif
inline undo_round(holder, who)
{
	for (i : 0 .. NR - 1) {
		if
		:: lockr[i] == holder && (mv & (1 << i)) != 0 ->
			printf("MSC: %c ROLLBACK: row %d stays parked at v%d\n", who, i, c_ver[i]);
			release_row(i);
#ifdef FIX_F12
			/*
			 * F12's fix: only a pending entry is a newer park; an entry of
			 * another fence (an older one put back meanwhile by a late
			 * abandon) is replaced, a slot it holds back to the counter (an
			 * in-flight one: its taker's settle then finds it replaced)
			 */
			if
			:: e_state[i] != NONE && e_state[i] != PENDING && e_ver[i] != c_ver[i] -> entry_remove(i, true)
			:: else -> skip
			fi;
#endif
			if
			:: e_state[i] == NONE ->
				new_gen(i, tmp); e_gen[i] = tmp; tmp = 0;
				e_state[i] = DUE; e_ver[i] = c_ver[i]; e_ft[i] = c_ft[i];
				e_woken[i] = false; e_owner[i] = 0; e_retry[i] = false;
				clear_skip(i);
#if NR == 2
				new_seq(i, c_pat[i]);
#endif
				if
				:: d_own == i + 1 ->
#ifndef MUTANT_M13
					/*
					 * the take used the slot of a settle that rolled back:
					 * that slot never existed, the entry comes back
					 * CONFIRMED without one; like any entry put back, it
					 * takes a live credit (a pulse that found it in flight
					 * left one)
					 */
					e_state[i] = CONFIRMED;
					if
					:: CREDIT_ON_UNDO && credit_live ->
						credit--;
						if
						:: credit == 0 -> credit_until = 0
						:: else -> skip
						fi;
						e_state[i] = DUE; in_work = true; WAKE_WORKER;
						printf("MSC: %c set: undo the take of row %d: entry back, uses a credit: due\n", who, i)
					:: else ->
						printf("MSC: %c set: undo the take of row %d: entry back, confirmed (the slot of the rolled-back settle did not exist)\n", who, i)
					fi
#else
					/* M13 (the code before): it comes back DUE, holding the slot */
					in_work = true; WAKE_WORKER;
					printf("MSC: %c set: undo the take of row %d: entry due, holds the settle's slot (M13)\n", who, i)
#endif
				:: else ->
					/* a pulse slot (of a due entry or the counter): it is spent again */
					g_live++; in_work = true; WAKE_WORKER;
					printf("MSC: %c set: undo the take of row %d: entry due (holds a slot)\n", who, i)
				fi
			:: else -> skip
			fi
		:: else -> skip
		fi
	}
	i = 0; mv = 0
}

#ifdef NEXT_ROWS
/*
 * After the settle-and-claim's claiming round (round: next_rows => 1; not
 * with next_rows => 0): a freed slot that no take used, when the claim
 * moved nothing, goes to the oldest visible row of the topic (a row
 * outside the model, there or not), else it is a pulse of one slot at
 * commit (aw_claim_next).  A take that used it and moved no row (locked
 * or stale) gave it back to the caller (aw_set_finish_round's own_left): the
 * entry of a locked row is confirmed again and holds no slot.  So it is
 * spent once: on a moved row, a visible row or the pulse.
 *
 * MUTANT_M11 (the code before 170c957): a locked entry keeps the slot
 * (settle), and a claim that moved nothing takes the visible row, or
 * sends the pulse, whether or not a take kept the slot.
 * MUTANT_M12 (the code before): next_rows => 0 sends no pulse.
 */
inline own_rest(round)
{
	if
	:: atomic {
#ifndef MUTANT_M11
		round && !d_spent && mv == 0 ->
#else
		round && mv == 0 ->
		g7_twice = d_spent;
		printf("MSC: D1 ... leases a visible row with its freed slot (M11: taken %d)\n", d_spent);
		assert(!g7_twice);
#endif
		d_vis = true;
		printf("MSC: D1 ... leases a visible row with its freed slot\n")
	   }
	:: d_step {
		!d_spent && mv == 0 ->
		d_owed = true;
#ifdef MUTANT_M12
		d_pulse = round;
		printf("MSC: D1 ... took nothing: a pulse of one slot at commit %d (M12: not with next_rows => 0)\n", round)
#else
		d_pulse = true;
		printf("MSC: D1 ... took nothing: a pulse of one slot at commit\n")
#endif
	   }
#ifdef MUTANT_M11
	:: d_step {
		mv == 0 && d_spent -> d_pulse = true;
		printf("MSC: D1 ... took nothing: a pulse of one slot at commit (M11: its slot was kept by a take)\n")
	   }
#endif
	:: d_step { d_spent || mv != 0 -> skip }
	fi
}

/*
 * At COMMIT of the settle-and-claim: the freed slot owed as a pulse is a
 * live slot (the ghost), and the pulse puts it on the counter
 */
inline commit_pulse()
{
	if
	:: d_owed -> g_live++
	:: else -> skip
	fi;
	if
	:: d_pulse ->
		/* G7: a pulse for a freed slot a take or a visible row already used */
		g7_twice = !d_owed;
		assert(!g7_twice);
		slots++; in_work = true; WAKE_WORKER;
		printf("MSC: D1 COMMIT: a pulse of one slot\n")
	:: else -> skip
	fi
}

#ifdef MUTANT_M10
#define SNAP_TAKE \
	for (i : 0 .. NR - 1) { s_ver[i] = c_ver[i]; s_ft[i] = c_ft[i]; s_parked[i] = c_parked[i] } \
	i = 0
#define SNAP_CLEAR \
	for (i : 0 .. NR - 1) { s_ver[i] = 0; s_ft[i] = 0; s_parked[i] = false } \
	i = 0
#else
#define SNAP_TAKE  skip
#define SNAP_CLEAR skip
#endif

/* the end of dispatcher 1's settle-and-claim transaction */
inline d_end()
{
	d_own = 0; d_vis = false; d_pulse = false; d_owed = false; d_rr = false;
	SNAP_CLEAR
}

#endif

#if NR == 2
#define pick_row(cond) \
	if \
	:: (cond(0)) -> r = 0 \
	:: (cond(1)) -> r = 1 \
	fi
#else
#define pick_row(cond) (cond(0)) -> r = 0
#endif

#define claimable(x) (lockr[x] == 0 && c_ft[x] <= now)
#if defined(NULL_TOKEN)
#define holds_lease(x) (lockr[x] == 0 && c_tok[x] != 0)
#elif defined(NO_RETOUCH)
#define holds_lease(x) (lockr[x] == 0 && c_tok[x] == d && !c_parked[x])
#else
#define holds_lease(x) (lockr[x] == 0 && c_tok[x] == d)
#endif

/*
 * A dispatcher, a bounded number of times: claim()s a visible row; or, for
 * a row whose lease it holds (lease_token matches; it still does after a
 * park, so a re-park is allowed), park()s it or fail()s it; each in a
 * transaction of its own that commits or rolls back.  fail() stands for
 * every lease-holder write that leaves the row unparked (complete,
 * dead_letter: a deleted row behaves the same for the set).
 */
/* the end of a park's transaction: its COMMIT callback is done */
inline park_done()
{
	d_gen[d] = 0; d_sv_valid[d] = false; d_sv_ver[d] = 0; d_sv_ft[d] = 0;
#if NR == 2
	d_sv_pat[d] = 0;
#endif
	d_fgen[d] = 0; d_row[d] = 0; busy[d] = false; r = 0
}

proctype dispatcher(byte d; byte maxops)
{
	byte ops = 0;
	byte r = 0;
	byte tmp = 0;
	bool inherit = false;
#ifdef NEXT_ROWS
	byte n = 0;     /* the settle-and-claim's claiming rounds, as the worker's */
	byte k = 0;
	byte i = 0;
	byte j = 0;
	byte f = 0;
	byte u = 0;
	byte o = 0;
	byte rc = 0;
	byte ro = 0;
	byte mv = 0;
#endif
#ifdef WAITER
	bool hand = false;      /* the confirm made the entry due: aw_waiters_wake_spender() */
	byte hs = 0;            /* its steps (hand_step1 .. 3) */
#endif

end:	do
#ifdef WAITER
	/* the hand-off of a confirm that made its entry due (hs: the step to run) */
	:: d_step { hs == 1 -> hand_step1(hs); if :: hs == 0 -> park_done() :: else -> skip fi }
	:: d_step { hs == 2 -> hand_step2(hs); if :: hs == 0 -> park_done() :: else -> skip fi }
	:: d_step { hs == 3 -> hand_step3(hs); park_done() }
#define HS_IDLE hs == 0 &&
#else
#define HS_IDLE
#endif
	:: HS_IDLE ops < maxops ->
		if
		:: atomic {
			/* claim(): FOR UPDATE SKIP LOCKED on a visible row, fence = lease */
			pick_row(claimable);
			ops++;
			busy[d] = true; d_row[d] = r;
			/* a claimed row that was parked: forget at commit the entry seen now */
			d_fgen[d] = (c_parked[r] -> generation_of(r) : 0);
			lockr[r] = d;
			new_ver(r, tmp); u_ver[r] = tmp; tmp = 0;
			u_ft[r] = now + LEASE;
			u_parked[r] = false;
			u_tok[r] = d;
			printf("MSC: D%d claim row %d: writes v%d (uncommitted)\n", d, r, u_ver[r])
		   };
			if
			:: d_step {
				/* COMMIT: the new version is visible, the lock released ... */
				printf("MSC: D%d COMMIT claim: row %d at v%d, leased to D%d\n", d, r, u_ver[r], d);
				commit_row(r)
			   };
				/* ... then the COMMIT callback: forget the entry of a parked row */
				d_step {
					set_forget(r, d);
					d_fgen[d] = 0; d_row[d] = 0;
					busy[d] = false; r = 0
				}
			:: d_step {
				printf("MSC: D%d ROLLBACK claim\n", d);
				release_row(r);
				d_fgen[d] = 0; d_row[d] = 0;
				busy[d] = false; r = 0
			   }
			fi
		:: atomic {
			/* park(): UPDATE ... WHERE lease_token = mine takes the row lock */
			pick_row(holds_lease);
			ops++;
			busy[d] = true; d_row[d] = r;
			lockr[r] = d;
			new_ver(r, tmp); u_ver[r] = tmp; tmp = 0;
			u_ft[r] = now + BACKOFF;
			u_parked[r] = true;
#if NR == 2
			u_pat[r] = now;
#endif
			u_tok[r] = d;
			/*
			 * RETURNING b.visible_after, b.parked_at: the row as it was,
			 * read by the FOR UPDATE subquery, so the latest committed
			 * version; if it was parked, a rollback puts its park back
			 */
			d_sv_valid[d] = c_parked[r];
			if
			:: c_parked[r] ->
				d_sv_ver[d] = c_ver[r]; d_sv_ft[d] = c_ft[r];
#if NR == 2
				d_sv_pat[d] = c_pat[r];
#endif
			:: else -> skip
			fi;
			printf("MSC: D%d park row %d (already parked at v%d: %d): writes fence v%d (uncommitted)\n",
			       d, r, c_ver[r], c_parked[r], u_ver[r])
		   };
			/* then the set: aw_set_park() */
			d_step { set_park(r, d) };
			if
			:: d_step {
				/* COMMIT: the fence is durable, the lock released ... */
				printf("MSC: D%d COMMIT park: row %d parked at v%d\n", d, r, u_ver[r]);
				commit_row(r)
			   };
				/* ... then the COMMIT callback: aw_set_confirm() */
#ifdef WAITER
				/* its hand-off, if any: three more steps, in the loop above */
				d_step {
					set_confirm(r, d); hs = (hand -> 1 : 0); hand = false;
					if
					:: hs == 0 -> park_done()
					:: else -> skip
					fi
				}
#else
				d_step {
#ifndef MUTANT_M1
					set_confirm(r, d);
#endif
					park_done()
				}
#endif
			:: d_step {
				/* ROLLBACK: the old version stays, the lock released ... */
				printf("MSC: D%d ROLLBACK park: row %d stays at v%d\n", d, r, c_ver[r]);
				release_row(r)
			   };
				/* ... then the ABORT callback: aw_set_abandon() with restore */
				d_step {
					set_abandon(r, d);
					d_gen[d] = 0; d_sv_valid[d] = false; d_sv_ver[d] = 0; d_sv_ft[d] = 0;
#if NR == 2
					d_sv_pat[d] = 0;
#endif
					d_fgen[d] = 0; d_row[d] = 0; busy[d] = false; r = 0
				}
			fi
		:: atomic {
			/* fail(): UPDATE ... WHERE lease_token = mine, parked_at = NULL */
			pick_row(holds_lease);
			ops++;
			busy[d] = true; d_row[d] = r;
			/* aw_xact_record_forget(): the entry seen under the row lock */
			d_fgen[d] = generation_of(r);
			lockr[r] = d;
			new_ver(r, tmp); u_ver[r] = tmp; tmp = 0;
			u_ft[r] = now + BACKOFF;
			u_parked[r] = false;
			u_tok[r] = d;
			printf("MSC: D%d fail row %d: writes v%d (uncommitted)\n", d, r, u_ver[r])
		   };
#ifdef NEXT_ROWS
			/*
			 * fail(..., next_rows => 1) (also complete, dead_letter):
			 * aw_claim_next(spend_parked) in the same statement spends the
			 * slot the settle freed (own_slots 1, slot_cap 1) on the oldest
			 * confirmed park, claimed straight from its fence
			 */
			if
			:: d == 1 ->
				printf("MSC: D%d ... with next_rows => 1: its freed slot\n", d);
				reoffer_round(TD, d, 'D', true, d, 1, 1);
				own_rest(true)
			:: true -> skip
			fi;
#endif
			if
			:: d_step {
				printf("MSC: D%d COMMIT fail: row %d at v%d\n", d, r, u_ver[r]);
				commit_row(r);
#ifdef NEXT_ROWS
				commit_pulse();
				commit_round(d, 'D');
				d_end();
#endif
				skip
			   };
				d_step {
					set_forget(r, d);
					d_fgen[d] = 0; d_row[d] = 0; busy[d] = false; r = 0
				}
			:: d_step {
				printf("MSC: D%d ROLLBACK fail: row %d stays at v%d\n", d, r, c_ver[r]);
				release_row(r);
#ifdef NEXT_ROWS
				undo_round(d, 'D');
				d_end();
#endif
				d_fgen[d] = 0; d_row[d] = 0; busy[d] = false; r = 0
			   }
			fi
#ifdef NEXT_ROWS
		:: d == 1 ->
			/*
			 * complete(key, token, next_rows => 1) of a row of the topic
			 * outside the model (src/outbox.c, aw_claim_next with
			 * spend_parked): the slot its settle freed goes to the topic's
			 * oldest confirmed park, claimed straight from its fence, in
			 * the same statement and transaction (aw_claim_spend); if it
			 * claims nothing the code takes a visible row or records a
			 * pulse of one slot at commit (left out: a slot fewer only
			 * makes a stranded row easier to find)
			 */
			if
			:: d_step {
				ops++; busy[d] = true;
				printf("MSC: D%d complete(another row, next_rows => 1): its freed slot\n", d)
			   };
				reoffer_round(TD, d, 'D', true, d, 1, 1);
				own_rest(true)
			:: d_step {
				/*
				 * BEGIN ISOLATION LEVEL REPEATABLE READ and a first
				 * statement: the transaction's snapshot; the settle comes
				 * later, in a step of its own
				 */
				ops++; busy[d] = true; d_rr = true;
				SNAP_TAKE;
				printf("MSC: D%d BEGIN REPEATABLE READ: snapshot\n", d)
			   };
				d_step { printf("MSC: D%d complete(another row, next_rows => 1), under REPEATABLE READ\n", d) };
				reoffer_round(TD, d, 'D', true, d, 1, 1);
				own_rest(true)
			:: d_step {
				/* next_rows => 0: no row wanted, the freed slot is a pulse */
				ops++; busy[d] = true;
				printf("MSC: D%d complete(another row, next_rows => 0): its freed slot\n", d)
			   };
				own_rest(false)
			fi;
			if
			:: d_step {
				printf("MSC: D%d COMMIT complete\n", d);
				commit_pulse();
				commit_round(d, 'D');
				d_end();
				busy[d] = false
			   }
			:: d_step {
				printf("MSC: D%d ROLLBACK complete\n", d);
				undo_round(d, 'D');
				d_end();
				busy[d] = false
			   }
			fi
#endif
		:: break
		fi
	:: HS_IDLE ops >= maxops -> break
	od
}

/* the worker's round: its topic is on the work list, and it has work */
#define round_due  (in_work && (slots > 0 || any_row(due_now) || !any_row(is_due)))

/*
 * The worker: aw_worker_spend() -> aw_reoffer_round(), and aw_set_expire().
 * A round is one transaction: reoffer_round(), then COMMIT.
 *
 * Without WAITER every change that puts the topic on the work list wakes
 * the worker, so it starts a round whenever the topic is on the list.
 * With WAITER a committed pulse() or a confirm that makes an entry due is
 * handed to the blocked claimer instead (aw_set_add_slots, aw_set_confirm),
 * so the worker's latch is modelled: it starts a round only when woken
 * (aw_wake_worker, or the timer of a retry time), and a wake that finds
 * nothing to do is consumed.
 */
active proctype worker()
{
	byte n = 0;
	byte k = 0;
	byte i = 0;
	byte j = 0;
	byte f = 0;
	byte tmp = 0;
	byte u = 0;     /* take_topic: slots used, own slots */
	byte o = 0;
	byte rc = 0;    /* reoffer_round: slot_cap left, own_slots, rows moved */
	byte ro = 0;
	byte mv = 0;

end:	do
	:: d_step {
		/*
		 * woken for a topic on the work list, unless all it has is due
		 * entries before their retry time (the worker sleeps until
		 * aw_set_next_retry())
		 */
#ifdef WAITER
		/* ResetLatch(); aw_worker_has_work() */
		(w_latch && round_due) -> w_latch = false; w_busy = true;
#else
		round_due -> w_busy = true;
#endif
#ifdef MUTANT_M4
		/* aw_set_new_round(): entries skipped by an earlier round are not skipped */
		for (i : 0 .. NR - 1) { e_skip[i] = false }
#endif
		i = 0
	   };
		reoffer_round(0, WORKER, 'W', in_work, 0, 0, 0);
		skip;   /* spin: a break may not jump straight into a d_step */
		/* COMMIT of the round: the rows it moved become visible */
		d_step {
			commit_round(WORKER, 'W');
#ifdef MUTANT_M4
			for (i : 0 .. NR - 1) { e_skip[i] = false }
			i = 0;
#endif
			n = 0;
			w_busy = false
		}
#ifdef WAITER
	:: d_step {
		/* woken with nothing to do: the latch is reset, back to sleep */
		(w_latch && !round_due) -> w_latch = false
	   }
#endif
	:: d_step {
		/* aw_set_expire(): drop confirmed entries whose fence has passed */
		(!w_busy && ((e_state[0] == CONFIRMED && e_ft[0] <= now)
#if NR == 2
		|| (e_state[1] == CONFIRMED && e_ft[1] <= now)
#endif
		)) ->
		for (i : 0 .. NR - 1) {
			if
			:: e_state[i] == CONFIRMED && e_ft[i] <= now ->
				printf("MSC: W expire the entry of row %d\n", i);
				entry_remove(i, false)
			:: else -> skip
			fi
		}
		i = 0
	   }
	:: d_step {
		/*
		 * the retry time of a due entry that found its row locked passes
		 * (5 ms and doubling, far below a tick of the clock: at any moment);
		 * with WAITER, the worker's timer sets its latch
		 */
		(e_retry[0]
#if NR == 2
		|| e_retry[1]
#endif
		) ->
		if
		:: e_retry[0] -> e_retry[0] = false; printf("MSC: W retry time of row 0\n")
#if NR == 2
		:: e_retry[1] -> e_retry[1] = false; printf("MSC: W retry time of row 1\n")
#endif
		fi;
		WAKE_WORKER
	   }
	od
}

#ifdef WAITER
/*
 * WAITER: one claim(wait => ...) blocked on the topic (src/claim_wait.c
 * aw_claim_wait, src/waiters.c).  It registers (queued), then repeats:
 * ResetLatch and aw_waiter_rearm() (queued again, not ready); the probe,
 * aw_claim_probe() -> aw_claim_once(): if the topic has work
 * (aw_set_topic_has_work: slots or due entries), aw_claim_spend() (the
 * direct hand-off): claiming rounds of aw_reoffer_step() with
 * slot_cap = max_rows = 1, each taking the topic's due, then oldest
 * CONFIRMED entry under the set lock and moving its row straight from the
 * parked fence to a lease for this claimer in one compare-and-set UPDATE
 * (aw_claim_parked_row), settled at once (aw_set_finish_round), in the claim's
 * own (sub)transaction; no re-offer transaction before the claim.  Slots
 * it does not use stay on the counter.  Then the claim of visible rows,
 * modelled as (nondeterministically) some other row of the topic;
 * if it found nothing, sleep until a wake makes it ready, or give up
 * (cancel, statement_timeout, the wait's end: at any moment while it
 * sleeps, also after a wake and before its probe).  Then
 * aw_waiter_leave(): off the queue, unregistered, a wake it holds passed
 * to the next waiter (there is none here); then, without a waiter to pass
 * it to, if the topic has work, wake the worker (MUTANT_M7: it does not).
 * Then its transaction commits: the row it claimed is leased to it (the
 * lease token WAITER_H, which no dispatcher holds: without NULL_TOKEN the
 * row is claimable again only when its lease passes).
 */
active proctype waiter()
{
	byte n = 0;
	byte k = 0;
	byte i = 0;
	byte j = 0;
	byte f = 0;
	byte tmp = 0;
	byte u = 0;     /* take_topic: slots used, own slots */
	byte o = 0;
	byte rc = 0;    /* reoffer_round: slot_cap left, own_slots, rows moved */
	byte ro = 0;
	byte mv = 0;

	bool found = false;

	/* aw_waiter_register() */
	d_step {
		q_reg = true; q_queued = true;
		printf("MSC: Q claim(wait): registered, queued\n")
	};
	do
	:: d_step {
		/* ResetLatch(); aw_set_last_hand(); aw_waiter_rearm() */
		q_busy = true; q_ready = false; q_queued = true; q_late = false;
		printf("MSC: Q probe\n")
	   };
		/* aw_claim_probe(): aw_set_topic_has_work(), then the round */
		if
		:: (slots > 0 || any_row(is_due)) -> reoffer_round(1, WAITER_H, 'Q', true, WAITER_H, 1, 0)
		:: else -> skip
		fi;
		/* aw_claim_once(): the rows it moved, or another row */
		if
		:: lockr[0] == WAITER_H
#if NR == 2
		   || lockr[1] == WAITER_H
#endif
		   -> found = true
		:: true -> printf("MSC: Q claims another row of the topic\n"); found = true
		:: lockr[0] != WAITER_H
#if NR == 2
		   && lockr[1] != WAITER_H
#endif
		   -> found = false
		fi;
		/*
		 * the subtransaction ends (rolled back if it found nothing); then
		 * aw_set_spender_release(hand): a record made after the claimer
		 * read the hand number stays; found nothing: WaitLatch()
		 */
		d_step {
			spender_release(false);
			if
			:: !found -> q_busy = false; printf("MSC: Q found nothing, sleeps\n")
			:: else -> skip
			fi
		};
		if
		:: found -> break
		:: else -> skip
		fi;
		if
		:: q_ready -> skip      /* woken: probe again */
		:: true -> d_step { q_busy = true; printf("MSC: Q cancelled (ready %d)\n", q_ready) }; break
		fi
	od;
	skip;   /* spin: a break may not jump straight into a d_step */
	/* aw_waiter_leave(), under the waiter lock: nobody to pass a wake to */
	d_step {
		printf("MSC: Q leave (ready %d)\n", q_ready);
		q_reg = false; q_queued = false; q_ready = false; found = false
	};
	/*
	 * ... then aw_set_spender_release(PG_UINT64_MAX): if it is the
	 * spender, what is left goes to the worker (MUTANT_M7: not woken)
	 */
	d_step { spender_release(true) };
	/* COMMIT of the claim's transaction */
	d_step {
		commit_round(WAITER_H, 'Q');
		q_busy = false
	}
}
#endif

/* ------------------------------------------------------------------
 * Properties
 * ------------------------------------------------------------------ */

#if NR == 2
#define sum_rows(x) (x(0) + x(1))
#else
#define sum_rows(x) (x(0))
#endif
#define slot_held(r)     (holds_slot(r) -> 1 : 0)
#define taken1(t, r)     (tk_valid[TK(t, r)] -> 1 : 0)
#if NT == 3
#define taken(r)         (taken1(0, r) + taken1(1, r) + taken1(2, r))
#elif NT == 2
#define taken(r)         (taken1(0, r) + taken1(1, r))
#else
#define taken(r)         taken1(0, r)
#endif
#define parked_ahead(r)  (c_parked[r] && c_ft[r] > now)

/* G2a: every live slot is in the counter, a credit, an entry or a take */
#define CONSERVED (g_live == slots + credit + sum_rows(slot_held) + sum_rows(taken))

/* quiescent: no transaction open, the worker idle with nothing to do */
#ifndef WAITER
#define QUIESCENT (!busy[1] && !busy[2] && !w_busy && !in_work)
#define STRANDED  (QUIESCENT && credit_live && any_row(parked_ahead))
#else
/*
 * WAITER: the worker runs only when woken, so the work list no longer says
 * that someone will spend: quiescent is also nobody woken (the worker's
 * latch, a retry timer, the claimer ready) and the claimer not in a probe,
 * leaving or committing, and no pulse between its commit and its hand-off.
 * Unspent slots (or a due entry nobody will take) then strand as surely as
 * a live credit does.
 */
#define retrying(r) (e_retry[r])
#define QUIESCENT (!busy[1] && !busy[2] && !w_busy && !w_latch && !any_row(retrying) && \
                   !q_busy && !q_ready && !p_hand)
#define STRANDED  (QUIESCENT && (credit_live || slots > 0 || any_row(due_now)) && any_row(parked_ahead))
#endif

active proctype g2_conserved()
{
end:	atomic { !CONSERVED -> assert(CONSERVED) }
}

active proctype g2_stranded()
{
end:	atomic { STRANDED -> assert(!STRANDED) }
}

init
{
	byte r;

	atomic {
		for (r : 0 .. NR - 1) {
			c_ver[r] = 1;
			c_mask[r] = 2;      /* version 1 committed */
			c_ft[r] = 0         /* visible at once */
		}
		r = 0;
		run dispatcher(1, MAXOPS1);
		run dispatcher(2, MAXOPS2)
	}
}
