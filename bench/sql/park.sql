-- outbox (a), candidate: park() a random row of the :nrows enqueued (r1..rN)
\set k random(1, :nrows)
SELECT aion_wake.park('r' || :k, '1 hour');
