-- Realtime events: the durable log behind the websocket, replayed on resume (?since=<id>).
--
-- Ids are per community and come from realtime_event_counters, updated as the last statement
-- of the writing transaction: the counter row lock is held until commit, so ids are handed out
-- in commit order and without gaps. A reader that has seen id N therefore knows that every
-- event with a smaller id is already committed (a sequence cannot promise that).
-- The foreign keys to communities are added by the migration that owns communities.

CREATE TABLE realtime_event_counters (
    community_id bigint PRIMARY KEY,
    last_id bigint NOT NULL
);

CREATE TABLE realtime_events (
    community_id bigint NOT NULL,
    id bigint NOT NULL,
    channel text NOT NULL,
    name text NOT NULL,
    -- json, not jsonb: kept byte for byte, so a replayed event carries the same keys in the
    -- same order as the live one, and nothing ever queries inside it.
    data json NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (community_id, id)
);

-- replay of one connection's channels: WHERE community_id = $1 AND channel = ANY($2) AND id > $3
CREATE INDEX realtime_events_channel_idx ON realtime_events (community_id, channel, id);
-- pruning by age; rows arrive in time order, so a BRIN index is tiny and enough
CREATE INDEX realtime_events_created_at_idx ON realtime_events USING brin (created_at);
