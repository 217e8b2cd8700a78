-- Versions of what a message's JSON is made of besides its own row (issue 13): a list page
-- keeps each message's JSON under its row and these (app/render/page_messages.py), so that a
-- page whose messages are kept reads no comment, like or user at all.
--
-- thread_versions: per message, bumped by every insert, update or delete of its comments, its
-- likes and its comments' likes, its comments' recipients, topics and attachments (a
-- message's own recipients, tags and attachments are in its page row). A message without a row
-- is at version 0 (nothing changed in its thread since it was posted, or since this migration:
-- kept JSON lives in a process and starts empty).
--
-- directory_versions: per community, bumped when what many messages show of other rows
-- changes: a user's embedded columns (storage.users.MANAGER_FIELDS: name, role, state,
-- title, photo...), a user deleted or moved, a link's row, a topic's name. Rare writes, all of
-- a community's kept messages then rendered again.
--
-- Triggers, not the application: every write path is covered, the command line and future
-- actions included. They are deferred, so a bump runs inside the writer's COMMIT, in the same
-- transaction as the change (a reader that sees the old version may or may not see the change,
-- one that sees the new version sees it), and its row is locked for the commit only, never
-- across a round trip to the application (issue 11, migration 0020): likes of one message,
-- or a provisioning upload beside profile edits, do not wait on each other's transactions. Bumps
-- run in the order their changes were made, before the events' and content versions' (queued
-- last by the unit of work's last statement).
--
-- No foreign keys: checking one at COMMIT would lock the message (or community) row, and a
-- writer of a comment racing a deletion of its message would deadlock with it. A deleted
-- message's row stays, harmless (ids are never reused; pages read versions by message id).
CREATE TABLE thread_versions (
    message_id bigint PRIMARY KEY,
    version bigint NOT NULL
);

CREATE TABLE directory_versions (
    community_id bigint PRIMARY KEY,
    version bigint NOT NULL
);

-- Whether the viewer likes a message or one of its comments (the page's `viewer_liked`: the
-- viewer's own like is shown first, storage.likes.TOP).
CREATE INDEX likes_message_liker_idx ON likes (message_id, user_id);

-- Only a message that still exists gets a row (after a deletion, nothing is bumped); once per
-- run of bumps of one message in a transaction (a comment, its recipients and its topics come
-- one after the other). PL/pgSQL, not SQL: its statement's plan is kept for the session (a SQL
-- function's is made at each call, which tripled a like's cost in PostgreSQL).
CREATE FUNCTION bump_thread_version(message bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('commons.thread_bumped', true), '') <> message::text THEN
        PERFORM set_config('commons.thread_bumped', message::text, true);
        INSERT INTO thread_versions AS t (message_id, version)
        SELECT m.id, 1 FROM messages m WHERE m.id = message
        ON CONFLICT (message_id) DO UPDATE SET version = t.version + 1;
    END IF;
END $$;

-- Once per transaction and community (a provisioning upload updates thousands of users).
CREATE FUNCTION bump_directory_version(community bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    done text := 'commons.directory_bumped_' || community;
BEGIN
    IF coalesce(current_setting(done, true), '') = '' THEN
        PERFORM set_config(done, 'yes', true);
        INSERT INTO directory_versions AS d (community_id, version)
        SELECT c.id, 1 FROM communities c WHERE c.id = community
        ON CONFLICT (community_id) DO UPDATE SET version = d.version + 1;
    END IF;
END $$;

-- Rows with a message_id: comments, likes, message_recipients, message_topics.
CREATE FUNCTION thread_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM bump_thread_version(OLD.message_id);
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.message_id <> OLD.message_id) THEN
        PERFORM bump_thread_version(NEW.message_id);
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER comments_thread_version
    AFTER INSERT OR UPDATE OR DELETE ON comments DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER likes_thread_version
    AFTER INSERT OR UPDATE OR DELETE ON likes DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION thread_row_changed();
-- A comment's recipients and topics; not their last_interacted_at, a copy of the message's own
-- (migration 0012).
CREATE CONSTRAINT TRIGGER message_recipients_thread_version_insert
    AFTER INSERT ON message_recipients DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.comment_id IS NOT NULL) EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER message_recipients_thread_version_delete
    AFTER DELETE ON message_recipients DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.comment_id IS NOT NULL) EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER message_recipients_thread_version_update
    AFTER UPDATE OF message_id, comment_id, user_id, group_id, reason, position
    ON message_recipients DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.comment_id IS NOT NULL OR NEW.comment_id IS NOT NULL)
    EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER message_topics_thread_version_insert
    AFTER INSERT ON message_topics DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (NEW.comment_id IS NOT NULL) EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER message_topics_thread_version_delete
    AFTER DELETE ON message_topics DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.comment_id IS NOT NULL) EXECUTE FUNCTION thread_row_changed();
CREATE CONSTRAINT TRIGGER message_topics_thread_version_update
    AFTER UPDATE OF message_id, comment_id, topic_id ON message_topics
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN (OLD.comment_id IS NOT NULL OR NEW.comment_id IS NOT NULL)
    EXECUTE FUNCTION thread_row_changed();

-- An attachment claimed by a comment (not its thumbnails, made on a later GET). A message
-- whose comments have attachments is never kept, so one let go needs no bump.
CREATE FUNCTION comment_attachment_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_thread_version(c.message_id) FROM comments c WHERE c.id = NEW.subject_id;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER attachments_thread_version
    AFTER INSERT OR UPDATE OF subject_type, subject_id ON attachments
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.subject_type = 'comment')
    EXECUTE FUNCTION comment_attachment_changed();

-- Rows with a community_id: users, external_resources, topics.
CREATE FUNCTION directory_row_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_directory_version(OLD.community_id);
    IF TG_OP = 'UPDATE' AND NEW.community_id <> OLD.community_id THEN
        PERFORM bump_directory_version(NEW.community_id);
    END IF;
    RETURN NULL;
END $$;

-- Users: the columns their embedded forms read (tests/app/render/test_page_messages.py checks
-- the list), and their community.
CREATE CONSTRAINT TRIGGER users_directory_version_update
    AFTER UPDATE ON users DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    WHEN ((OLD.username, OLD.first_name, OLD.last_name, OLD.role, OLD.state, OLD.title,
           OLD.company_login, OLD.out_of_office, OLD.back_in_office_on, OLD.avatar_id,
           OLD.community_id)
          IS DISTINCT FROM
          (NEW.username, NEW.first_name, NEW.last_name, NEW.role, NEW.state, NEW.title,
           NEW.company_login, NEW.out_of_office, NEW.back_in_office_on, NEW.avatar_id,
           NEW.community_id))
    EXECUTE FUNCTION directory_row_changed();
CREATE CONSTRAINT TRIGGER users_directory_version_delete
    AFTER DELETE ON users DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION directory_row_changed();

-- Links (their upsert's no-op update changes nothing) and topics' names.
CREATE CONSTRAINT TRIGGER external_resources_directory_version
    AFTER UPDATE ON external_resources DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION directory_row_changed();
CREATE CONSTRAINT TRIGGER external_resources_directory_version_delete
    AFTER DELETE ON external_resources DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION directory_row_changed();
CREATE CONSTRAINT TRIGGER topics_directory_version
    AFTER UPDATE OF name ON topics DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION directory_row_changed();
