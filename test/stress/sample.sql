-- test/stress/sample.sql: a sample of the limited topics' in_flight and
-- max_in_flight from aion_wake.topics, for the G8 check (in_flight must
-- never exceed the limit; how often it reached it shows the limit bound).
INSERT INTO stress_inflight (topic, in_flight, max_in_flight)
SELECT topic, in_flight, max_in_flight FROM aion_wake.topics WHERE max_in_flight IS NOT NULL;
