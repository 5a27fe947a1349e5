--
-- protocol: the non-transactional shared-memory protocol
-- (park_pending, confirm, abandon, take_confirmed) and the views.
--
-- the status view has one row and starts empty
SELECT capacity, parked_pending, parked_confirmed, served FROM aion_wake.status;

-- pending, then confirmed with no wake: confirm returns false
SELECT aion_wake.park_pending('a', 3, 'proto');
SELECT dispatch_key, topic, attempt, state, woken, fence IS NULL AS unfenced,
       owner_pid = pg_backend_pid() AS mine
  FROM aion_wake.parked;
SELECT parked_pending, parked_confirmed FROM aion_wake.status;
SELECT aion_wake.confirm('a');
SELECT dispatch_key, state, woken, owner_pid FROM aion_wake.parked;
SELECT parked_pending, parked_confirmed FROM aion_wake.status;

-- take_confirmed removes and returns it, with its attempt
SELECT * FROM aion_wake.take_confirmed('proto');
SELECT count(*) FROM aion_wake.parked;

-- a wake during the pending window: confirm returns true, entry gone
SELECT aion_wake.park_pending('b', 0, 'proto');
SELECT * FROM aion_wake.take_confirmed('proto');
SELECT dispatch_key, state, woken FROM aion_wake.parked;
SELECT aion_wake.confirm('b');
SELECT count(*) FROM aion_wake.parked;
SELECT wakes_deferred FROM aion_wake.status;

-- confirm of an unknown key, or twice, returns false
SELECT aion_wake.confirm('nope');
SELECT aion_wake.park_pending('c', 0, 'proto');
SELECT aion_wake.confirm('c');
SELECT aion_wake.confirm('c');

-- abandon forgets pending and confirmed entries; unknown keys give false
SELECT aion_wake.abandon('c');
SELECT aion_wake.abandon('c');
SELECT aion_wake.park_pending('d', 0, 'proto');
SELECT aion_wake.abandon('d');
SELECT count(*) FROM aion_wake.parked;

-- oldest first across topics, max_rows respected
SELECT aion_wake.park_pending('o1', 0, 'p1') AND NOT aion_wake.confirm('o1');
SELECT aion_wake.park_pending('o2', 0, 'p2') AND NOT aion_wake.confirm('o2');
SELECT aion_wake.park_pending('o3', 0, 'p1') AND NOT aion_wake.confirm('o3');
SELECT * FROM aion_wake.take_confirmed(max_rows => 2);
SELECT * FROM aion_wake.take_confirmed('p2');
SELECT * FROM aion_wake.take_confirmed();

-- a take that finds fewer confirmed rows than max_rows wakes pending ones,
-- one per row still wanted
SELECT aion_wake.park_pending('w1', 0, 'pw');
SELECT aion_wake.park_pending('w2', 0, 'pw');
SELECT aion_wake.park_pending('w3', 0, 'pw');
SELECT aion_wake.confirm('w1');
SELECT * FROM aion_wake.take_confirmed('pw', 2);
SELECT dispatch_key, state, woken FROM aion_wake.parked ORDER BY 1;
SELECT aion_wake.confirm('w2'), aion_wake.confirm('w3');
SELECT * FROM aion_wake.take_confirmed('pw');

-- re-parking a key keeps one entry and inherits a wake
SELECT aion_wake.park_pending('r', 1, 'pr');
SELECT * FROM aion_wake.take_confirmed('pr');
SELECT aion_wake.park_pending('r', 2, 'pr');
SELECT dispatch_key, attempt, state, woken FROM aion_wake.parked;
SELECT aion_wake.confirm('r');
SELECT count(*) FROM aion_wake.parked;

-- the two kinds never collide: a park_pending key and an outbox row of
-- the same name are different entries
SELECT aion_wake.enqueue('same', '{}', 'pk');
SELECT count(*) FROM aion_wake.claim('pk');
SELECT aion_wake.park('same', '1 hour');
SELECT aion_wake.park_pending('same', 0, 'pk');
SELECT dispatch_key, state, fence IS NULL AS unfenced FROM aion_wake.parked ORDER BY unfenced;
SELECT aion_wake.abandon('same');
SELECT dispatch_key, state, fence IS NULL AS unfenced FROM aion_wake.parked;
SELECT aion_wake.complete('same');
SELECT count(*) FROM aion_wake.parked;

-- bad input: class 22, never a crash
SELECT err($$SELECT aion_wake.park_pending(NULL)$$);
SELECT err($$SELECT aion_wake.park_pending('')$$);
SELECT err($$SELECT aion_wake.park_pending(repeat('x', 256))$$);
SELECT aion_wake.park_pending(repeat('x', 255), 0, 'plong');
SELECT aion_wake.abandon(repeat('x', 255));
SELECT err($$SELECT aion_wake.park_pending('k', NULL)$$);
SELECT err($$SELECT aion_wake.park_pending('k', 0, NULL)$$);
SELECT err($$SELECT aion_wake.park_pending('k', 0, '')$$);
SELECT err($$SELECT aion_wake.park_pending('k', 0, 'has space')$$);
SELECT err($$SELECT aion_wake.park_pending('k', 0, repeat('t', 64))$$);
SELECT err($$SELECT aion_wake.park_pending('k', 0, 'ü')$$);
SELECT aion_wake.park_pending('k', 0, repeat('t', 63));
SELECT aion_wake.abandon('k');
SELECT err($$SELECT aion_wake.confirm(NULL)$$);
SELECT err($$SELECT aion_wake.abandon('')$$);
SELECT err($$SELECT * FROM aion_wake.take_confirmed('proto', 0)$$);
SELECT err($$SELECT * FROM aion_wake.take_confirmed('proto', -1)$$);
SELECT err($$SELECT * FROM aion_wake.take_confirmed('bad topic')$$);
SELECT count(*) FROM aion_wake.parked;
