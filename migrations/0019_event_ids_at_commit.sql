-- Realtime event ids handed out AT COMMIT (issue 11, bench/event_counter.py).
--
-- Before: the writing transaction's last statement bumped realtime_event_counters, and the
-- counter row stayed locked until the client's COMMIT arrived: a round trip back to the
-- application, whose event loop may take many milliseconds to send it under load. Every
-- event-producing write of one community queued on that lock.
--
-- Now: the transaction stages its events (one row, arrays in order) without touching the
-- counter; a deferred constraint trigger runs inside COMMIT itself, takes the counter, inserts
-- the events with their ids and tells the client the first id with a NOTICE (read by
-- storage/events.py). The counter's row lock is held only for that trigger and the commit
-- record: inside the server, never across a round trip. Ids stay per community, gap-free and
-- in commit order (the lock is still held until the commit completes), so resume is exact as
-- before.
--
-- Unlogged: a staged row lives only inside its transaction (the trigger deletes it), so there
-- is nothing to recover after a crash.
CREATE UNLOGGED TABLE realtime_events_staged (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL,
    channels text[] NOT NULL,
    names text[] NOT NULL,
    datas text[] NOT NULL
);

CREATE FUNCTION realtime_events_number() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint := cardinality(NEW.channels);
    last bigint;
BEGIN
    INSERT INTO realtime_event_counters AS c (community_id, last_id) VALUES (NEW.community_id, n)
    ON CONFLICT (community_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id
    RETURNING c.last_id INTO last;
    INSERT INTO realtime_events (community_id, id, channel, name, data)
    SELECT NEW.community_id, last - n + e.ord, e.channel, e.name, e.data::json
    FROM unnest(NEW.channels, NEW.names, NEW.datas) WITH ORDINALITY AS e(channel, name, data, ord);
    DELETE FROM realtime_events_staged WHERE id = NEW.id;
    -- storage/events.py reads this: the staged row, the community and the first id
    RAISE NOTICE 'commons-realtime-events % % %', NEW.id, NEW.community_id, last - n + 1;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER realtime_events_number AFTER INSERT ON realtime_events_staged
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION realtime_events_number();
