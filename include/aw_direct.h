/*-------------------------------------------------------------------------
 *
 * aw_direct.h
 *	  What the outbox's writes done without the executor share: a claim's
 *	  first look (claim_direct.c) and complete_many's delete
 *	  (settle_direct.c).  Each does one statement's work on the outbox by
 *	  the table and index access methods, only where that statement would
 *	  do nothing else; these say where.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_direct.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_DIRECT_H
#define AW_DIRECT_H

#include "nodes/parsenodes.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "aw_names.h"

/*
 * What a write without the executor learned of the outbox's catalogs,
 * kept until a relcache invalidation (of any relation: they are rare, and
 * the outbox's own come with every ALTER, index build and vacuum of it)
 * or until the outbox found by name is another table
 */
typedef struct AwDirectCache
{
	bool		known;			/* what the caller learned is filled in */
	bool		fit;			/* and the write may run here */
	Oid			rel;			/* aion_wake.outbox */
	bool		registered;		/* the invalidation callback is */
} AwDirectCache;

/*
 * aion_wake.outbox, locked, if the caller has need on the whole table and
 * cache does not know it unfit; else InvalidOid
 */
extern Oid	aw_direct_outbox(AwDirectCache *cache, AclMode need);

/* the transaction allows it: READ COMMITTED, may write, no permission hook */
extern bool aw_direct_xact_may(void);

/*
 * rel is a plain table: no partitions or children, row security,
 * triggers or rules, so that a write of its rows does nothing else
 */
extern bool aw_direct_rel_plain(Relation rel);

/* the column of desc named name, of type type; else InvalidAttrNumber */
extern AttrNumber aw_direct_column(TupleDesc desc, const char *name, Oid type);

/* the function of an index column's operator strategy, or InvalidOid */
extern Oid	aw_direct_op(Relation index, int col, Oid righttype, int16 strategy);

/* whether an index column has its type's default btree operator class */
extern bool aw_direct_default_opclass(Relation index, int col, Oid type);

/* a row complete_many's delete deleted (settle_direct.c) */
typedef struct AwDirectDeleted
{
	int			pair;			/* its place in the keys given */
	char		topic[AW_TOPIC_MAXLEN + 1];
	TimestampTz old_fence;		/* its fence */
	bool		was_parked;		/* parked_at was set */
} AwDirectDeleted;

extern bool aw_settle_direct_complete(const char *const *keys, const int64 *tokens, int n,
									  AwDirectDeleted *deleted, int *ndeleted);

#endif							/* AW_DIRECT_H */
