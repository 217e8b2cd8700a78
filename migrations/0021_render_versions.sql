-- Versions of what a message's JSON is made of besides its own row (issue 13): a list page
-- keeps each message's JSON under its row and these (app/render/page_messages.py), so that a
-- page whose messages are kept reads no comment, like or user at all.
--
-- thread_versions: per message, bumped by every insert, update or delete of its comments, its
-- likes and its comments' likes, its and its comments' recipients and topics, and its
-- comments' attachments: in the same transaction as the change, so a reader that sees the old
-- version may or may not see the change, one that sees the new version sees it. A message
-- without a row is at version 0 (nothing changed in its thread since it was posted, or since
-- this migration: kept JSON lives in a process and starts empty).
--
-- directory_versions: per community, bumped when what many messages show of other rows
-- changes: a user's embedded columns (storage.users.MANAGER_FIELDS: name, role, state,
-- title, photo...), a user deleted, a link's row, a topic's name. Rare writes, all of a
-- community's kept messages then rendered again.
--
-- Triggers, not the application: every write path is covered, the command line and future
-- actions included. Each bump locks one narrow row until the writer commits: writers of one
-- thread (likes of one message) take turns at its row, as comments already do at the
-- message's row (last_interacted_at); the directory row is taken by profile edits only.
CREATE TABLE thread_versions (
    message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    version bigint NOT NULL
);

CREATE TABLE directory_versions (
    community_id bigint PRIMARY KEY REFERENCES communities (id) ON DELETE CASCADE,
    version bigint NOT NULL
);

-- Only a message that still exists gets a row (a cascade from a deleted message bumps nothing).
CREATE FUNCTION bump_thread_version(message bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO thread_versions AS t (message_id, version)
    SELECT m.id, 1 FROM messages m WHERE m.id = message
    ON CONFLICT (message_id) DO UPDATE SET version = t.version + 1
$$;

CREATE FUNCTION bump_directory_version(community bigint) RETURNS void LANGUAGE sql AS $$
    INSERT INTO directory_versions AS d (community_id, version)
    SELECT c.id, 1 FROM communities c WHERE c.id = community
    ON CONFLICT (community_id) DO UPDATE SET version = d.version + 1
$$;

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

CREATE TRIGGER comments_thread_version AFTER INSERT OR UPDATE OR DELETE ON comments
    FOR EACH ROW EXECUTE FUNCTION thread_row_changed();
CREATE TRIGGER likes_thread_version AFTER INSERT OR UPDATE OR DELETE ON likes
    FOR EACH ROW EXECUTE FUNCTION thread_row_changed();
-- Not their last_interacted_at: a copy of the message's own (migration 0012), in its row.
CREATE TRIGGER message_recipients_thread_version
    AFTER INSERT OR DELETE OR UPDATE OF message_id, comment_id, user_id, group_id, reason, position
    ON message_recipients FOR EACH ROW EXECUTE FUNCTION thread_row_changed();
CREATE TRIGGER message_topics_thread_version
    AFTER INSERT OR DELETE OR UPDATE OF message_id, comment_id, topic_id
    ON message_topics FOR EACH ROW EXECUTE FUNCTION thread_row_changed();

-- A comment's attachments (a message's own show in its row: has_attachments).
CREATE FUNCTION comment_attachment_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.subject_type = 'comment' THEN
        PERFORM bump_thread_version(c.message_id) FROM comments c WHERE c.id = OLD.subject_id;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.subject_type = 'comment' THEN
        PERFORM bump_thread_version(c.message_id) FROM comments c WHERE c.id = NEW.subject_id;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER attachments_thread_version AFTER INSERT OR UPDATE OR DELETE ON attachments
    FOR EACH ROW EXECUTE FUNCTION comment_attachment_changed();

-- Users: once per statement and community (provisioning updates thousands in one).
CREATE FUNCTION users_directory_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM bump_directory_version(o.community_id)
        FROM (SELECT DISTINCT community_id FROM old_users ORDER BY 1) o;
    ELSE
        PERFORM bump_directory_version(x.community_id) FROM (
            SELECT DISTINCT n.community_id FROM new_users n JOIN old_users o ON o.id = n.id
            WHERE (o.username, o.first_name, o.last_name, o.role, o.state, o.title,
                   o.company_login, o.out_of_office, o.back_in_office_on, o.avatar_id,
                   o.community_id)
                IS DISTINCT FROM
                  (n.username, n.first_name, n.last_name, n.role, n.state, n.title,
                   n.company_login, n.out_of_office, n.back_in_office_on, n.avatar_id,
                   n.community_id)
            ORDER BY 1
        ) x;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER users_directory_version_update AFTER UPDATE ON users
    REFERENCING OLD TABLE AS old_users NEW TABLE AS new_users
    FOR EACH STATEMENT EXECUTE FUNCTION users_directory_changed();
CREATE TRIGGER users_directory_version_delete AFTER DELETE ON users
    REFERENCING OLD TABLE AS old_users
    FOR EACH STATEMENT EXECUTE FUNCTION users_directory_changed();

-- Links (their upsert's no-op update changes nothing) and topics' names.
CREATE FUNCTION row_directory_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM bump_directory_version(OLD.community_id);
    RETURN NULL;
END $$;

CREATE TRIGGER external_resources_directory_version AFTER UPDATE ON external_resources
    FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION row_directory_changed();
CREATE TRIGGER external_resources_directory_version_delete AFTER DELETE ON external_resources
    FOR EACH ROW EXECUTE FUNCTION row_directory_changed();
CREATE TRIGGER topics_directory_version AFTER UPDATE OF name ON topics
    FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name)
    EXECUTE FUNCTION row_directory_changed();
