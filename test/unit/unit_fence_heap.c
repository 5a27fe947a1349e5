/*-------------------------------------------------------------------------
 *
 * unit_fence_heap.c
 *	  Unit test of the fence heap (src/fence_heap.c), compiled standalone.
 *
 *	  Random pushes, removals of arbitrary nodes and pops of the top are
 *	  checked against a reference model (a plain array searched linearly):
 *	  after every operation the heap property holds, every node's index
 *	  names its place, the top is the model's earliest (time, seq), and a
 *	  full heap refuses a push.  Times collide often, so ties by sequence
 *	  number are exercised.  Exits 1 on the first discrepancy.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  test/unit/unit_fence_heap.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>

#include "aw_fence_heap.h"

#define CAPACITY 257
#define OPERATIONS 1000000

static AwHeapNode nodes[CAPACITY * 2];
static AwHeapNode *storage[CAPACITY];
static AwHeap heap;
static int	failures = 0;

static void
fail(const char *what, long op)
{
	fprintf(stderr, "unit_fence_heap: operation %ld: %s\n", op, what);
	failures++;
	exit(1);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t
next_random(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int
earlier(const AwHeapNode *a, const AwHeapNode *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void
check(long op)
{
	int32_t		i;
	int			in_heap = 0;
	AwHeapNode *best = NULL;

	for (i = 0; i < heap.size; i++)
	{
		if (heap.nodes[i]->index != i)
			fail("a node's index does not name its place", op);
		if (i > 0 && earlier(heap.nodes[i], heap.nodes[(i - 1) / 2]))
			fail("a node is earlier than its parent", op);
	}
	for (i = 0; i < CAPACITY * 2; i++)
	{
		if (nodes[i].index < 0)
			continue;
		in_heap++;
		if (nodes[i].index >= heap.size || heap.nodes[nodes[i].index] != &nodes[i])
			fail("a node thinks it is in the heap but is not", op);
		if (best == NULL || earlier(&nodes[i], best))
			best = &nodes[i];
	}
	if (in_heap != heap.size)
		fail("the heap's size differs from the model's", op);
	if (aw_heap_top(&heap) != best)
		fail("the top is not the earliest node", op);
}

int
main(void)
{
	long		op;
	uint64_t	seq = 0;
	int			i;

	for (i = 0; i < CAPACITY * 2; i++)
		nodes[i].index = -1;
	aw_heap_init(&heap, storage, CAPACITY);
	if (aw_heap_top(&heap) != NULL)
		fail("an empty heap has a top", 0);

	for (op = 1; op <= OPERATIONS; op++)
	{
		AwHeapNode *n = &nodes[next_random() % (CAPACITY * 2)];
		unsigned	what = (unsigned) (next_random() % 8);

		if (what < 4 && n->index < 0)
		{
			bool		full = (heap.size == CAPACITY);

			n->at = (int64_t) (next_random() % 64) - 32;	/* many ties */
			n->seq = seq++;
			if (aw_heap_push(&heap, n) == full)
				fail(full ? "a full heap took a node" : "a push was refused", op);
		}
		else if (what < 6 && n->index >= 0)
			aw_heap_remove(&heap, n);
		else if (what >= 6 && heap.size > 0)
			aw_heap_remove(&heap, aw_heap_top(&heap));
		check(op);
	}
	printf("unit_fence_heap: %d operations, %d failures\n", OPERATIONS, failures);
	return failures != 0;
}
