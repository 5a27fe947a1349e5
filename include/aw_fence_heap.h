/*-------------------------------------------------------------------------
 *
 * aw_fence_heap.h
 *	  A binary min-heap of nodes ordered by time, each of which knows its
 *	  position, so any node can be removed in O(log n).
 *
 *	  The parked set keeps its confirmed entries in one, ordered by fence,
 *	  so that expiring them costs O(log n) each; the nodes are embedded in
 *	  the entries and the node array lives beside them in shared memory.
 *	  The caller guards a heap with its own lock.  This header includes no
 *	  PostgreSQL headers, so that the heap can be compiled standalone for
 *	  its unit test (test/unit/unit_fence_heap.c) as well as inside the
 *	  extension.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_fence_heap.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_FENCE_HEAP_H
#define AW_FENCE_HEAP_H

#include <stdbool.h>
#include <stdint.h>

/* a node: earlier `at` first, ties by `seq`; index is -1 outside a heap */
typedef struct AwHeapNode
{
	int64_t		at;
	uint64_t	seq;
	int32_t		index;
} AwHeapNode;

typedef struct AwHeap
{
	int32_t		size;
	int32_t		capacity;
	AwHeapNode **nodes;			/* capacity slots, provided by the caller */
} AwHeap;

extern void aw_heap_init(AwHeap *heap, AwHeapNode **storage, int32_t capacity);
extern bool aw_heap_push(AwHeap *heap, AwHeapNode *node);
extern void aw_heap_remove(AwHeap *heap, AwHeapNode *node);
extern AwHeapNode *aw_heap_top(const AwHeap *heap);

#endif							/* AW_FENCE_HEAP_H */
