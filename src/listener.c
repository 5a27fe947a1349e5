/*-------------------------------------------------------------------------
 *
 * listener.c
 *	  The worker's listening connection for raw NOTIFY aion_wake_capacity.
 *
 *	  Core refuses LISTEN in a background process, so the worker holds one
 *	  libpq connection to its own server over the Unix socket, LISTENs on
 *	  it, and waits on its socket together with its latch.  This file
 *	  opens that connection, drains its notifications into the handler the
 *	  worker gives it (the worker parses and spends them), reconnects with
 *	  a back-off when it fails, and publishes in the worker's slot whether
 *	  it listens and why not (aion_wake.status.listening, listen_error).
 *
 *	  That connection is an ordinary client backend, which would hold up a
 *	  smart shutdown forever: the postmaster waits for client backends to
 *	  leave before it stops background workers.  The listener therefore
 *	  watches postmaster.pid (with inotify, so idle costs nothing), where the
 *	  postmaster writes "stopping" when a shutdown begins, and then closes
 *	  the connection for good.
 *
 * Copyright (c) 2026, aion_wake authors
 *
 * IDENTIFICATION
 *	  src/listener.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>
#ifdef __linux__
#include <sys/inotify.h>
#define AW_HAVE_INOTIFY 1
#endif

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "libpq-fe.h"
#include "libpq/libpq-be-fe-helpers.h"
#include "miscadmin.h"
#include "postmaster/postmaster.h"
#include "storage/fd.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "utils/memutils.h"
#include "utils/pidfile.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "aion_wake.h"
#include "aw_listener.h"
#include "aw_settings.h"

/* bounds of the delay between attempts to open the listening connection */
#define AW_CONNECT_MIN_MS		1000
#define AW_CONNECT_MAX_MS		60000
/* without inotify, how often a connection held open looks at postmaster.pid */
#define AW_PID_FILE_LOOK_MS		2000

static AwWorkerSlot *aw_slot = NULL;
static AwRawPulseHandler aw_raw_pulse = NULL;

static PGconn *aw_conn = NULL;
static TimestampTz aw_next_connect = 0;
static int	aw_connect_delay_ms = AW_CONNECT_MIN_MS;
static bool aw_stopping = false;
static int	aw_inotify_fd = -1;
static bool aw_pid_file_changed = true;
static uint32 aw_conn_generation = 0;
static char *aw_login_role = NULL;
static char aw_conn_role[NAMEDATALEN];	/* role of the open connection */

/*
 * Set the listener up for the worker of this slot, which has just
 * connected to its database; each raw pulse's payload goes to handler.
 */
void
aw_listener_init(AwWorkerSlot *slot, AwRawPulseHandler handler)
{
	aw_slot = slot;
	aw_raw_pulse = handler;

	/* the role the listening connection logs in as by default */
	StartTransactionCommand();
	aw_login_role = MemoryContextStrdup(TopMemoryContext,
										GetUserNameFromId(BOOTSTRAP_SUPERUSERID, false));
	CommitTransactionCommand();
}

static void
aw_publish_listen_state(bool listening, const char *error)
{
	SpinLockAcquire(&aw_slot->mutex);
	aw_slot->listening = listening;
	strlcpy(aw_slot->listen_error, error ? error : "", sizeof(aw_slot->listen_error));
	SpinLockRelease(&aw_slot->mutex);
}

/* ---------------------------------------------------------------------
 * Smart shutdown: watch postmaster.pid for the "stopping" status.
 * ---------------------------------------------------------------------
 */

/* Has the postmaster begun to shut down?  Reads line 8 of postmaster.pid. */
static bool
aw_postmaster_stopping(void)
{
	char		path[MAXPGPATH];
	char		buf[1024];
	FILE	   *f;
	int			line = 1;
	bool		stopping = false;

	snprintf(path, sizeof(path), "%s/postmaster.pid", DataDir);
	f = AllocateFile(path, "r");
	if (f == NULL)
		return true;			/* the postmaster removes it when it is gone */
	while (fgets(buf, sizeof(buf), f) != NULL)
	{
		if (line++ == LOCK_FILE_LINE_PM_STATUS)
		{
			stopping = strncmp(buf, PM_STATUS_STOPPING, strlen(PM_STATUS_STOPPING)) == 0;
			break;
		}
	}
	FreeFile(f);
	return stopping;
}

/*
 * Watch postmaster.pid with inotify.  Without it (not Linux, or no
 * descriptor to spare) the listener reads the file on every wake, and
 * wakes every AW_PID_FILE_LOOK_MS while it holds the connection.
 */
void
aw_listener_watch_shutdown(void)
{
#ifdef AW_HAVE_INOTIFY
	char		path[MAXPGPATH];

	if (!AcquireExternalFD())
		return;
	aw_inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (aw_inotify_fd < 0)
	{
		ReleaseExternalFD();
		return;
	}
	snprintf(path, sizeof(path), "%s/postmaster.pid", DataDir);
	if (inotify_add_watch(aw_inotify_fd, path, IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE_SELF) < 0)
	{
		close(aw_inotify_fd);
		aw_inotify_fd = -1;
		ReleaseExternalFD();
	}
#endif
}

static void
aw_drain_inotify(void)
{
#ifdef AW_HAVE_INOTIFY
	char		buf[4096] pg_attribute_aligned(8);

	while (read(aw_inotify_fd, buf, sizeof(buf)) > 0)
		;
#endif
}

/* ---------------------------------------------------------------------
 * The listening connection.
 * ---------------------------------------------------------------------
 */

/*
 * Close the connection, if open, and publish that the worker does not
 * listen, with why (NULL: no reason to show).
 */
void
aw_listener_close(const char *why)
{
	if (aw_conn != NULL)
	{
		libpqsrv_disconnect(aw_conn);
		aw_conn = NULL;
		aw_conn_generation++;
	}
	aw_publish_listen_state(false, why);
}

/*
 * At process exit: close the connection, if open.  The worker clears the
 * rest of its slot itself.
 */
void
aw_listener_exit(void)
{
	if (aw_conn != NULL)
	{
		PQfinish(aw_conn);
		aw_conn = NULL;
	}
}

static void
aw_listen_failed(const char *what, const char *detail)
{
	char		msg[256];
	char	   *nl;

	snprintf(msg, sizeof(msg), "%s: %s", what, detail ? detail : "");
	if ((nl = strchr(msg, '\n')) != NULL)
		*nl = '\0';
	ereport(LOG,
			(errmsg("aion_wake worker is not listening for capacity pulses"),
			 errdetail("%s", msg),
			 errhint("aion_wake.pulse() keeps working. Allow the worker's connection in pg_hba.conf, or set \"%s\" to off.",
					 "aion_wake.listen")));
	aw_listener_close(msg);
	aw_next_connect = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), aw_connect_delay_ms);
	aw_connect_delay_ms = Min(aw_connect_delay_ms * 2, AW_CONNECT_MAX_MS);
}

/* The role the listening connection logs in as. */
static const char *
aw_listen_role(void)
{
	return (aw_worker_role && aw_worker_role[0]) ? aw_worker_role : aw_login_role;
}

/*
 * Open the loopback connection over the first Unix socket directory (or
 * localhost when there is none) and LISTEN.
 */
static void
aw_listen_connect(void)
{
	char		port[16];
	char	   *host;
	char	   *dirs = pstrdup(Unix_socket_directories ? Unix_socket_directories : "");
	List	   *dirlist = NIL;
	const char *keywords[] = {"host", "port", "dbname", "user", "application_name",
	"options", "sslmode", "gssencmode", "connect_timeout", NULL};
	const char *values[10];
	PGresult   *res;

	host = "localhost";
	if (SplitDirectoriesString(dirs, ',', &dirlist) && dirlist != NIL &&
		((char *) linitial(dirlist))[0] != '@')
		host = (char *) linitial(dirlist);
	snprintf(port, sizeof(port), "%d", PostPortNumber);

	values[0] = host;
	values[1] = port;
	values[2] = aw_slot->dbname;
	values[3] = aw_listen_role();
	strlcpy(aw_conn_role, values[3], sizeof(aw_conn_role));
	values[4] = "aion_wake listener";
	values[5] = "-c idle_session_timeout=0 -c idle_in_transaction_session_timeout=0 -c statement_timeout=0";
	values[6] = "disable";
	values[7] = "disable";
	values[8] = "10";
	values[9] = NULL;

	aw_conn = libpqsrv_connect_params(keywords, values, false,
									  aw_wait_event_listener_connect());
	aw_conn_generation++;
	list_free_deep(dirlist);
	pfree(dirs);
	if (aw_conn == NULL || PQstatus(aw_conn) != CONNECTION_OK)
	{
		aw_listen_failed("could not connect", aw_conn ? PQerrorMessage(aw_conn) : "out of memory");
		return;
	}
	res = libpqsrv_exec(aw_conn, "LISTEN aion_wake_capacity",
						aw_wait_event_listener_connect());
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
	{
		aw_listen_failed("LISTEN failed", PQerrorMessage(aw_conn));
		PQclear(res);
		return;
	}
	PQclear(res);
	if (PQsetnonblocking(aw_conn, 1) != 0)
	{
		aw_listen_failed("could not make the connection non-blocking", PQerrorMessage(aw_conn));
		return;
	}
	aw_connect_delay_ms = AW_CONNECT_MIN_MS;
	aw_publish_listen_state(true, NULL);
	ereport(LOG, (errmsg("aion_wake worker is listening on channel \"%s\"", "aion_wake_capacity")));
}

/* Read what the socket has and hand every notification buffered over. */
static void
aw_listen_drain(void)
{
	PGnotify   *n;

	if (!PQconsumeInput(aw_conn))
	{
		aw_listen_failed("connection lost", PQerrorMessage(aw_conn));
		return;
	}
	while ((n = PQnotifies(aw_conn)) != NULL)
	{
		if (aw_listen && strcmp(n->relname, "aion_wake_capacity") == 0)
			aw_raw_pulse(n->extra);
		PQfreemem(n);
	}
}

/*
 * Once per pass of the worker's loop, before its work: close the
 * connection for good if the server is shutting down; else open it if it
 * is due, and hand over what it received.
 */
void
aw_listener_poll(void)
{
	/* without inotify, look at postmaster.pid on every wake */
	if (aw_inotify_fd < 0)
		aw_pid_file_changed = true;
	if (aw_pid_file_changed && !aw_stopping && aw_postmaster_stopping())
	{
		aw_stopping = true;
		aw_listener_close("the server is shutting down");
	}
	aw_pid_file_changed = false;

	if (aw_listen && !aw_stopping && aw_conn == NULL &&
		GetCurrentTimestamp() >= aw_next_connect)
		aw_listen_connect();
	if (aw_conn != NULL)
		aw_listen_drain();
}

/*
 * After a configuration reload: close the connection if aion_wake.listen
 * was turned off, and open it again at once as the new role if
 * aion_wake.worker_role changed.
 */
void
aw_listener_reload(void)
{
	if (!aw_listen && aw_conn != NULL)
		aw_listener_close("aion_wake.listen is off");
	if (aw_conn != NULL && strcmp(aw_conn_role, aw_listen_role()) != 0)
	{
		aw_listener_close(NULL);
		aw_next_connect = 0;
		aw_connect_delay_ms = AW_CONNECT_MIN_MS;
	}
}

/*
 * When the listener must be looked at although nothing wakes the worker:
 * the next attempt to connect, or (without inotify, while the connection
 * is open) the next look at postmaster.pid.  0 for none.
 */
TimestampTz
aw_listener_next_deadline(TimestampTz now)
{
	if (aw_listen && !aw_stopping && aw_conn == NULL)
		return aw_next_connect;
	if (aw_inotify_fd < 0 && aw_conn != NULL)
		return TimestampTzPlusMilliseconds(now, AW_PID_FILE_LOOK_MS);
	return 0;
}

/*
 * Changes whenever the connection's socket does: the worker builds its
 * wait event set again.
 */
uint32
aw_listener_generation(void)
{
	return aw_conn_generation;
}

/* Add the listening socket and the postmaster.pid watch, when there are. */
void
aw_listener_add_wait_events(WaitEventSet *set)
{
	if (aw_conn != NULL)
		AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(aw_conn), NULL, NULL);
	if (aw_inotify_fd >= 0)
		AddWaitEventToSet(set, WL_SOCKET_READABLE, aw_inotify_fd, NULL, NULL);
}

/*
 * One event the worker's wait returned.  The socket needs nothing here:
 * aw_listener_poll() reads it on the next pass.
 */
void
aw_listener_event(const WaitEvent *event)
{
	if ((event->events & WL_SOCKET_READABLE) && event->fd == aw_inotify_fd)
	{
		aw_drain_inotify();
		aw_pid_file_changed = true;
	}
}
