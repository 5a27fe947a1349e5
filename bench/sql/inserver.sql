-- bench/sql/inserver.sql -- per-call cost measured inside one backend.
--
-- pgbench figures include a round trip (and, for writes, a WAL flush at
-- commit) per statement, and on a small shared VM they drift from run to run.
-- These loops time the calls themselves in one plpgsql loop: no network, no
-- commit, little scheduling noise.  Each returns microseconds per iteration.
-- Loaded into the throwaway benchmark cluster only.

-- two no-op statements that build the same keys as bench_pair()
CREATE FUNCTION bench_noop2(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp();
BEGIN
	FOR i IN 1..n LOOP
		PERFORM 'i:' || i;
		PERFORM 'i:' || i;
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;

-- park_pending + confirm of a fresh key (entries are taken back afterwards)
CREATE FUNCTION bench_pair(n int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); us float8;
BEGIN
	FOR i IN 1..n LOOP
		PERFORM aion_wake.park_pending('i:' || i, 0, 'inserver');
		PERFORM aion_wake.confirm('i:' || i);
	END LOOP;
	us := extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
	PERFORM count(*) FROM aion_wake.take_confirmed('inserver');
	RETURN us;
END $$;

-- take_confirmed(topic, 10), timed alone; each take is followed (untimed) by
-- a refill of 10 fresh entries so the set keeps its size
CREATE FUNCTION bench_take(n int, topic text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t timestamptz; acc interval := '0'; got bigint;
	-- keys unique to this call: a refill must add entries, never replace one
	prefix text := 'in:' || txid_current() || ':';
BEGIN
	FOR i IN 1..n LOOP
		t := clock_timestamp();
		SELECT count(*) INTO got FROM aion_wake.take_confirmed(topic, 10);
		acc := acc + (clock_timestamp() - t);
		IF got <> 10 THEN
			RAISE EXCEPTION 'take_confirmed returned % rows, not 10', got;
		END IF;
		PERFORM count(*) FILTER (WHERE aion_wake.park_pending(x, 0, topic)
		                           AND NOT aion_wake.confirm(x))
		   FROM (SELECT prefix || i || ':' || g AS x FROM generate_series(1, 10) g) s;
	END LOOP;
	RETURN extract(epoch FROM acc) * 1e6 / n;
END $$;

-- park() of a random row among r1..rN, and the bare fence UPDATE it replaces
CREATE FUNCTION bench_park(n int, nrows int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); k int;
BEGIN
	FOR i IN 1..n LOOP
		k := 1 + floor(random() * nrows)::int;
		PERFORM aion_wake.park('r' || k, '1 hour');
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;

CREATE FUNCTION bench_fence_update(n int, nrows int) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); k int;
BEGIN
	FOR i IN 1..n LOOP
		k := 1 + floor(random() * nrows)::int;
		UPDATE aion_wake.outbox SET visible_after = clock_timestamp() + '1 hour',
		       parked_at = clock_timestamp() WHERE dispatch_key = 'r' || k;
	END LOOP;
	RETURN extract(epoch FROM clock_timestamp() - t0) * 1e6 / n;
END $$;
