-- Streams and group chat whose cost does not grow with the community (issue 14, docs/feed.md).
--
-- Stream pages are read as an indexed union: the top rows of each source (the viewer's groups,
-- people they follow, their own messages, their recipient rows, announcements, a topic, an
-- author, an external system) are walked through an index ordered like the page
-- (last_interacted_at DESC, id DESC), then merged. Sources that are rows of another table
-- (recipients, topics) carry a copy of their message's last_interacted_at, kept in step by the
-- triggers below inside the same transaction as the message's change.

-- Recipient rows: @Mentions and the "addressed to me" part of Home.
ALTER TABLE message_recipients ADD COLUMN last_interacted_at timestamptz;
-- Topic rows: the `tag` filter.
ALTER TABLE message_topics ADD COLUMN last_interacted_at timestamptz;

-- A new recipient or topic row takes its message's last_interacted_at (unless the writer gave
-- it already: bulk loads copy it themselves).
CREATE FUNCTION feed_copy_last_interacted_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.last_interacted_at IS NULL THEN
        SELECT m.last_interacted_at INTO NEW.last_interacted_at
        FROM messages m WHERE m.id = NEW.message_id;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER message_recipients_last_interacted_at
    BEFORE INSERT ON message_recipients
    FOR EACH ROW EXECUTE FUNCTION feed_copy_last_interacted_at();
CREATE TRIGGER message_topics_last_interacted_at
    BEFORE INSERT ON message_topics
    FOR EACH ROW EXECUTE FUNCTION feed_copy_last_interacted_at();

-- A message that moves (a comment) moves its recipient and topic rows with it: a handful of
-- rows per message, found through the (message_id, ...) unique indexes.
CREATE FUNCTION feed_follow_last_interacted_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE message_recipients SET last_interacted_at = NEW.last_interacted_at
    WHERE message_id = NEW.id
      AND last_interacted_at IS DISTINCT FROM NEW.last_interacted_at;
    UPDATE message_topics SET last_interacted_at = NEW.last_interacted_at
    WHERE message_id = NEW.id
      AND last_interacted_at IS DISTINCT FROM NEW.last_interacted_at;
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_last_interacted_at_follow
    AFTER UPDATE OF last_interacted_at ON messages
    FOR EACH ROW WHEN (OLD.last_interacted_at IS DISTINCT FROM NEW.last_interacted_at)
    EXECUTE FUNCTION feed_follow_last_interacted_at();

-- Existing rows: filled here when the tables are small; a large database is filled in batches
-- by `commons backfill-feed` while serving. Until then the pages also read every row still NULL
-- (through the small partial indexes below, empty once filled), so they stay exact.
DO $$
BEGIN
    IF (SELECT count(*) FROM (SELECT 1 FROM message_recipients LIMIT 200001) s) <= 200000 THEN
        UPDATE message_recipients r SET last_interacted_at = m.last_interacted_at
        FROM messages m WHERE m.id = r.message_id;
    END IF;
    IF (SELECT count(*) FROM (SELECT 1 FROM message_topics LIMIT 200001) s) <= 200000 THEN
        UPDATE message_topics t SET last_interacted_at = m.last_interacted_at
        FROM messages m WHERE m.id = t.message_id;
    END IF;
END
$$;

CREATE INDEX message_recipients_user_feed_idx
    ON message_recipients (user_id, last_interacted_at DESC, message_id DESC)
    WHERE user_id IS NOT NULL;
CREATE INDEX message_recipients_unfilled_idx ON message_recipients (user_id)
    WHERE user_id IS NOT NULL AND last_interacted_at IS NULL;
CREATE INDEX message_topics_unfilled_idx ON message_topics (topic_id)
    WHERE last_interacted_at IS NULL;
CREATE INDEX message_topics_topic_feed_idx
    ON message_topics (topic_id, last_interacted_at DESC, message_id DESC);
CREATE INDEX messages_external_system_feed_idx
    ON messages (external_system_id, last_interacted_at DESC, id DESC)
    WHERE external_system_id IS NOT NULL;
CREATE INDEX messages_announcement_feed_idx
    ON messages (community_id, last_interacted_at DESC, id DESC)
    WHERE is_announcement;

-- Group chat: a member's unread count is counted when read (others' chat messages after
-- max(last_viewed_at, joining)), through this index, so posting no longer writes one row per
-- member.
CREATE INDEX group_chat_messages_group_created_idx
    ON group_chat_messages (group_id, created_at);
ALTER TABLE group_chat_reads DROP COLUMN unread_count;
