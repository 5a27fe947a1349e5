/*-------------------------------------------------------------------------
 *
 * fence_heap.c
 *	  A binary min-heap of nodes ordered by time (see aw_fence_heap.h).
 *
 *	  Pure C, no PostgreSQL: the unit test in test/unit compiles this file
 *	  on its own and checks it against a reference model.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/fence_heap.c
 *
 *-------------------------------------------------------------------------
 */
#include <stddef.h>

#include "aw_fence_heap.h"

static inline bool
aw_heap_less(const AwHeapNode *a, const AwHeapNode *b)
{
	if (a->at != b->at)
		return a->at < b->at;
	return a->seq < b->seq;
}

static inline void
aw_heap_place(AwHeap *heap, int32_t i, AwHeapNode *node)
{
	heap->nodes[i] = node;
	node->index = i;
}

static void
aw_heap_sift_up(AwHeap *heap, int32_t i)
{
	AwHeapNode *node = heap->nodes[i];

	while (i > 0)
	{
		int32_t		parent = (i - 1) / 2;

		if (!aw_heap_less(node, heap->nodes[parent]))
			break;
		aw_heap_place(heap, i, heap->nodes[parent]);
		i = parent;
	}
	aw_heap_place(heap, i, node);
}

static void
aw_heap_sift_down(AwHeap *heap, int32_t i)
{
	AwHeapNode *node = heap->nodes[i];

	for (;;)
	{
		int32_t		child = 2 * i + 1;

		if (child >= heap->size)
			break;
		if (child + 1 < heap->size &&
			aw_heap_less(heap->nodes[child + 1], heap->nodes[child]))
			child++;
		if (!aw_heap_less(heap->nodes[child], node))
			break;
		aw_heap_place(heap, i, heap->nodes[child]);
		i = child;
	}
	aw_heap_place(heap, i, node);
}

void
aw_heap_init(AwHeap *heap, AwHeapNode **storage, int32_t capacity)
{
	heap->size = 0;
	heap->capacity = capacity;
	heap->nodes = storage;
}

/* Add a node that is in no heap; false when the heap is full. */
bool
aw_heap_push(AwHeap *heap, AwHeapNode *node)
{
	if (heap->size >= heap->capacity)
		return false;
	aw_heap_place(heap, heap->size++, node);
	aw_heap_sift_up(heap, node->index);
	return true;
}

/* Remove a node of this heap, wherever it is. */
void
aw_heap_remove(AwHeap *heap, AwHeapNode *node)
{
	int32_t		i = node->index;
	AwHeapNode *last;

	node->index = -1;
	last = heap->nodes[--heap->size];
	if (last == node)
		return;
	aw_heap_place(heap, i, last);
	aw_heap_sift_up(heap, i);
	aw_heap_sift_down(heap, last->index);
}

/* The node with the earliest time, or NULL when the heap is empty. */
AwHeapNode *
aw_heap_top(const AwHeap *heap)
{
	return heap->size > 0 ? heap->nodes[0] : NULL;
}
