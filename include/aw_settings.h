/*-------------------------------------------------------------------------
 *
 * aw_settings.h
 *	  The configuration parameters of aion_wake (settings.c).
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  include/aw_settings.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef AW_SETTINGS_H
#define AW_SETTINGS_H

extern char *aw_database_list;
extern int	aw_max_parked_rows;
extern int	aw_max_topics;
extern int	aw_max_leases;
extern int	aw_max_rates;
extern int	aw_unfenced_max_age_ms;
extern int	aw_pulse_credit_ms;
extern int	aw_max_wait_ms;
extern bool aw_listen;
extern bool aw_notify_ready;
extern char *aw_worker_role;
extern int	aw_lost_wake_tolerance_ms;
extern bool aw_debug_drop_wakes;
extern int	aw_debug_look_lock;

extern void aw_define_settings(void);

#endif							/* AW_SETTINGS_H */
