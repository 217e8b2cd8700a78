-- `commons worker` processes say they are alive every few seconds; /readyz and /metrics read
-- this table. `stats` carries the worker's push counters since it started (sent, failed,
-- retried, pruned), so that the web processes' /metrics can report them.
CREATE TABLE worker_heartbeats (
    worker_id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    beat_at timestamptz NOT NULL DEFAULT now(),
    stats jsonb NOT NULL DEFAULT '{}'::jsonb
);
