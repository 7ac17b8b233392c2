-- One heartbeat for the whole fleet (CONTRACT §18). Each instance proves its LISTEN connection
-- hears what is committed by hearing heartbeats sent through the pool. Postgres wakes every
-- listening backend of a database for each NOTIFY, whatever the channel, and each wake-up is a
-- transaction: one heartbeat per instance made an idle fleet of N cost 5·N² transactions a second.
-- So the instances share one: every 200 ms each asks to beat, the first whose beat_at is old
-- enough bumps seq and notifies it, and every instance learns the latest seq from the same
-- statement, and expects to hear it.
CREATE TABLE gateway_heartbeat (
  id integer PRIMARY KEY CHECK (id = 1),
  seq bigint NOT NULL,
  beat_at timestamptz NOT NULL
);
INSERT INTO gateway_heartbeat (id, seq, beat_at) VALUES (1, 0, '-infinity');
