-- bench/throughput/jobs.sql: the hand-written queue the throughput
-- benchmarks measure aion_wake against (run.sh, count.sh): a table of the
-- outbox's shape and constraints, its own token sequence, the index a
-- hand-written SKIP LOCKED claim uses, the install script's autovacuum
-- settings, and a trigger that NOTIFYs listening workers on insert.
CREATE SEQUENCE public.bench_jobs_token_seq;
CREATE TABLE public.bench_jobs (LIKE aion_wake.outbox INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE,
	PRIMARY KEY (dispatch_key)) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01,
	autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_insert_scale_factor = 0.05,
	autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0);
CREATE INDEX ON public.bench_jobs (topic, visible_after);
CREATE FUNCTION public.bench_jobs_notify() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN PERFORM pg_notify('bench_jobs', ''); RETURN NULL; END$$;
CREATE TRIGGER bench_jobs_notify AFTER INSERT ON public.bench_jobs
	FOR EACH STATEMENT EXECUTE FUNCTION public.bench_jobs_notify();
GRANT ALL ON public.bench_jobs, public.bench_jobs_token_seq TO PUBLIC;
