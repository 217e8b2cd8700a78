-- Versions behind the ETags of the lists clients poll (issue 13, docs/polling.md).
--
-- One row per (community, scope): user_id 0 is the community's content (anything any viewer
-- could see: messages, comments, likes, polls, memberships, groups, users, follows...), user_id
-- N > 0 is what only user N sees (their notifications' read state, their bookmarks, their
-- conversation and chat read state). A unit of work (app/actions/work.py) names the rows its
-- change touches; they are bumped INSIDE the COMMIT, by the same deferred trigger that numbers
-- the realtime events (migration 0019), so that:
-- - the new version is visible exactly when the change is (same transaction): a reader that
--   sees the old version may or may not see the change, one that sees the new version sees it;
-- - the community's row is locked only for the trigger and the commit record, never across a
--   round trip to the application (issue 11: a row updated in the transaction's body serializes
--   every writer of the community for as long as the slowest one takes to send COMMIT).
-- Rows are bumped in (community, user_id) order, after the event counter, so two commits never
-- wait on each other in opposite orders.
CREATE TABLE content_versions (
    community_id bigint NOT NULL,
    user_id bigint NOT NULL,
    version bigint NOT NULL,
    PRIMARY KEY (community_id, user_id)
);

-- Bump rows of one community, in user_id order (the lock order). The one copy of this SQL:
-- the commit trigger below and storage/versions.py (writes outside a unit of work) call it.
CREATE FUNCTION bump_content_versions(community bigint, users bigint[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO content_versions AS v (community_id, user_id, version)
    SELECT community, u.user_id, 1 FROM (SELECT DISTINCT unnest(users) AS user_id) u
    ORDER BY u.user_id
    ON CONFLICT (community_id, user_id) DO UPDATE SET version = v.version + 1
$$;

-- The rows a staged unit of work bumps at its commit (0 = the community's content row).
ALTER TABLE realtime_events_staged ADD COLUMN versions bigint[] NOT NULL DEFAULT '{}';

CREATE OR REPLACE FUNCTION realtime_events_number() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint := cardinality(NEW.channels);
    last bigint;
BEGIN
    IF n > 0 THEN
        INSERT INTO realtime_event_counters AS c (community_id, last_id)
        VALUES (NEW.community_id, n)
        ON CONFLICT (community_id) DO UPDATE SET last_id = c.last_id + EXCLUDED.last_id
        RETURNING c.last_id INTO last;
        INSERT INTO realtime_events (community_id, id, channel, name, data)
        SELECT NEW.community_id, last - n + e.ord, e.channel, e.name, e.data::json
        FROM unnest(NEW.channels, NEW.names, NEW.datas)
             WITH ORDINALITY AS e(channel, name, data, ord);
    END IF;
    IF cardinality(NEW.versions) > 0 THEN
        PERFORM bump_content_versions(NEW.community_id, NEW.versions);
    END IF;
    DELETE FROM realtime_events_staged WHERE id = NEW.id;
    IF n > 0 THEN
        -- storage/events.py reads this: the staged row, the community and the first id
        RAISE NOTICE 'commons-realtime-events % % %', NEW.id, NEW.community_id, last - n + 1;
    END IF;
    RETURN NULL;
END
$$;
