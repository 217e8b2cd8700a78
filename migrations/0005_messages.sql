-- The feed: messages, comments, likes, flags, polls, topics (tags), recipients, link
-- previews, group hides, stream read state, and message full-text search.
-- Every table carries community_id. Counts (comments, likes, shares, poll responses) are
-- computed from the rows, never kept as counters, so concurrent writers cannot make them drift.

CREATE TABLE messages (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id bigint REFERENCES groups (id) ON DELETE CASCADE,
    -- external systems are built later; their messages are matched on this column
    external_system_id bigint,
    title text NOT NULL DEFAULT '',
    body text NOT NULL DEFAULT '',
    html_body text NOT NULL DEFAULT '',
    action text NOT NULL DEFAULT '',
    verb text,
    message_type text NOT NULL DEFAULT 'status_message',
    external_url text,
    -- where it was posted from: api, web, webhook, external_system... (rendered as `source`)
    source text,
    is_announcement boolean NOT NULL DEFAULT false,
    days_of_stickiness integer NOT NULL DEFAULT 0 CHECK (days_of_stickiness >= 0),
    sticky_until timestamptz,
    shared_message_id bigint REFERENCES messages (id) ON DELETE SET NULL,
    client_provided_guid text,
    -- ids in external_resources, in the order the URLs appear in the body
    external_resource_ids bigint[] NOT NULL DEFAULT '{}',
    -- rendered as-is in `extensions` (thanks announcements and the like); json, not jsonb, so
    -- that the keys keep their order
    extensions json NOT NULL DEFAULT '[]'::json,
    last_interacted_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    search_vector tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english', title), 'A')
        || setweight(to_tsvector('english', body), 'B')
    ) STORED
);
CREATE INDEX messages_feed_idx ON messages (community_id, last_interacted_at DESC, id DESC);
CREATE INDEX messages_group_idx ON messages (group_id, last_interacted_at DESC, id DESC)
    WHERE group_id IS NOT NULL;
CREATE INDEX messages_user_idx ON messages (user_id, last_interacted_at DESC, id DESC);
CREATE INDEX messages_external_system_idx ON messages (community_id, external_system_id)
    WHERE external_system_id IS NOT NULL;
CREATE INDEX messages_shared_idx ON messages (shared_message_id)
    WHERE shared_message_id IS NOT NULL;
CREATE INDEX messages_announcement_idx ON messages (community_id, sticky_until)
    WHERE is_announcement;
CREATE INDEX messages_search_idx ON messages USING gin (search_vector);

CREATE TABLE comments (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    text text NOT NULL DEFAULT '',
    html_body text NOT NULL DEFAULT '',
    external_resource_ids bigint[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX comments_message_idx ON comments (message_id, created_at, id);

-- Likes of a message (comment_id NULL) or of one of its comments. One per user and target.
CREATE TABLE likes (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    comment_id bigint REFERENCES comments (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX likes_message_user_key ON likes (message_id, user_id)
    WHERE comment_id IS NULL;
CREATE UNIQUE INDEX likes_comment_user_key ON likes (comment_id, user_id)
    WHERE comment_id IS NOT NULL;
CREATE INDEX likes_user_idx ON likes (user_id);

-- Flags (bookmarks): the Bookmarked stream.
CREATE TABLE flags (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (message_id, user_id)
);
CREATE INDEX flags_user_idx ON flags (user_id, message_id);

-- Polls are created first, then bound to one message of their creator (message_id).
CREATE TABLE polls (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    message_id bigint UNIQUE REFERENCES messages (id) ON DELETE CASCADE,
    question text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE poll_answers (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    poll_id bigint NOT NULL REFERENCES polls (id) ON DELETE CASCADE,
    position integer NOT NULL,
    text text NOT NULL
);
CREATE INDEX poll_answers_poll_idx ON poll_answers (poll_id, position, id);

CREATE TABLE poll_responses (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    poll_id bigint NOT NULL REFERENCES polls (id) ON DELETE CASCADE,
    answer_id bigint NOT NULL REFERENCES poll_answers (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (poll_id, user_id)
);
CREATE INDEX poll_responses_answer_idx ON poll_responses (answer_id);

-- Topics (hashtags). Names are stored lower-case.
CREATE TABLE topics (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    name text NOT NULL CHECK (name = lower(name) AND name <> ''),
    description text,
    creator_id bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (community_id, name)
);

-- Topics of a thread: used in the message body (comment_id NULL) or in one of its comments.
CREATE TABLE message_topics (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    comment_id bigint REFERENCES comments (id) ON DELETE CASCADE,
    topic_id bigint NOT NULL REFERENCES topics (id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX message_topics_key
    ON message_topics (message_id, topic_id, coalesce(comment_id, 0));
CREATE INDEX message_topics_topic_idx ON message_topics (topic_id, message_id);

-- Users and groups a message is addressed to: its group, @mentions and message[recipients]
-- (comment_id NULL), or @mentions in a comment (comment_id set). `reason` says which (an edit
-- replaces the mentions only); `position` keeps their order.
CREATE TABLE message_recipients (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    comment_id bigint REFERENCES comments (id) ON DELETE CASCADE,
    user_id bigint REFERENCES users (id) ON DELETE CASCADE,
    group_id bigint REFERENCES groups (id) ON DELETE CASCADE,
    reason text NOT NULL DEFAULT 'mention' CHECK (reason IN ('group', 'mention', 'addressed')),
    position integer NOT NULL DEFAULT 0,
    CHECK ((user_id IS NULL) <> (group_id IS NULL))
);
CREATE UNIQUE INDEX message_recipients_key ON message_recipients
    (message_id, coalesce(comment_id, 0), coalesce(user_id, 0), coalesce(group_id, 0));
CREATE INDEX message_recipients_user_idx ON message_recipients (user_id, message_id)
    WHERE user_id IS NOT NULL;
CREATE INDEX message_recipients_group_idx ON message_recipients (group_id, message_id)
    WHERE group_id IS NOT NULL;

-- Links found in bodies. No network fetch happens: title is the URL until a previewer fills
-- the rest in.
CREATE TABLE external_resources (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    url text NOT NULL,
    title text,
    description text,
    resource_type text,
    oembed jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (community_id, url)
);

-- A group admin's hide_message: the message leaves the group's stream.
CREATE TABLE message_hides (
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    hidden_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, message_id)
);
CREATE INDEX message_hides_message_idx ON message_hides (message_id);

-- When each user last read each stream (new_updates = activity after it).
CREATE TABLE stream_reads (
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    stream_id bigint NOT NULL REFERENCES streams (id) ON DELETE CASCADE,
    last_read_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, stream_id)
);

-- Attachments of messages and comments are read by whoever reads the message (the rule of
-- storage/messages.py READABLE; see migration 0004 for the dispatcher).
CREATE OR REPLACE FUNCTION attachment_readable_message(
    p_message_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM messages m
        LEFT JOIN groups g ON g.id = m.group_id
        WHERE m.id = p_message_id AND m.community_id = p_community_id
          AND CASE
                WHEN m.group_id IS NULL THEN
                    NOT p_external OR m.user_id = p_viewer_id
                    OR EXISTS (SELECT 1 FROM message_recipients r
                               WHERE r.message_id = m.id AND r.comment_id IS NULL
                                 AND r.user_id = p_viewer_id)
                ELSE EXISTS (SELECT 1 FROM group_memberships gm
                             WHERE gm.group_id = m.group_id AND gm.user_id = p_viewer_id)
                     OR (NOT p_external AND g.permission = 'public')
              END
    )
$$;

CREATE OR REPLACE FUNCTION attachment_readable_comment(
    p_comment_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT coalesce((
        SELECT attachment_readable_message(c.message_id, p_community_id, p_viewer_id,
                                           p_external)
        FROM comments c WHERE c.id = p_comment_id AND c.community_id = p_community_id
    ), false)
$$;
