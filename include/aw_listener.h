/*-------------------------------------------------------------------------
 *
 * aw_listener.h
 *	  The worker's listening connection for raw NOTIFY aion_wake_capacity
 *	  pulses (src/listener.c).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_listener.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_LISTENER_H
#define AW_LISTENER_H

#include "datatype/timestamp.h"
#include "storage/latch.h"

#include "aw_worker_slots.h"

/*
 * What the listener does with the payload of one raw pulse.  The listener
 * only receives; the worker parses and spends (src/worker.c).
 */
typedef void (*AwRawPulseHandler) (const char *payload);

/* the most wait events aw_listener_add_wait_events() adds */
#define AW_LISTENER_WAIT_EVENTS	2

extern void aw_listener_init(AwWorkerSlot *slot, AwRawPulseHandler handler);
extern void aw_listener_watch_shutdown(void);
extern void aw_listener_poll(void);
extern void aw_listener_reload(void);
extern void aw_listener_close(const char *why);
extern void aw_listener_exit(void);
extern TimestampTz aw_listener_next_deadline(TimestampTz now);
extern uint32 aw_listener_generation(void);
extern void aw_listener_add_wait_events(WaitEventSet *set);
extern void aw_listener_event(const WaitEvent *event);

#endif							/* AW_LISTENER_H */
