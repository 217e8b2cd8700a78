-- Conversations (one-to-one and shared chats), their members and activities, and group chat
-- messages.
--
-- Member-set reuse: `member_set_key` is "<kind>:<sorted current member ids>" (kind p for a
-- one-to-one conversation, s for a shared one), unique per community. POST /api/conversations
-- computes the key of the requested set and reuses the conversation holding it. The key
-- follows the members: adding or removing one recomputes it, and when the new key is already
-- held by another conversation this one gets NULL (the older conversation keeps being the one
-- reused). The kind prefix keeps a shared conversation that shrank to two members from being
-- reused as a one-to-one.

CREATE TABLE conversations (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    name text,
    private boolean NOT NULL,
    member_set_key text,
    creator_id bigint REFERENCES users (id) ON DELETE SET NULL,
    -- denormalized from conversation_activities for the list order and latest_activity
    latest_activity_id bigint,
    last_activity_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX conversations_member_set_key ON conversations (community_id, member_set_key)
    WHERE member_set_key IS NOT NULL;

CREATE TABLE conversation_members (
    conversation_id bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    joined_at timestamptz NOT NULL DEFAULT now(),
    -- read state: the newest activity acknowledged, and the remarks by others after it
    last_read_activity_id bigint NOT NULL DEFAULT 0,
    unread_count integer NOT NULL DEFAULT 0,
    hidden boolean NOT NULL DEFAULT false,
    -- a member who left keeps the row (re-adding clears it); every read filters on it
    left_at timestamptz,
    PRIMARY KEY (conversation_id, user_id)
);
-- a user's conversation list, newest first, is driven from here
CREATE INDEX conversation_members_user_idx ON conversation_members (user_id, conversation_id)
    WHERE left_at IS NULL;

CREATE TABLE conversation_activities (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    conversation_id bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    actor_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    verb text NOT NULL CHECK (verb IN ('post', 'update', 'join', 'leave')),
    text text,
    html text,
    longitude double precision,
    latitude double precision,
    client_provided_guid text,
    -- a shared message (remark[shared_message_id]); no foreign key, so a deleted message
    -- simply renders as null
    shared_message_id bigint,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX conversation_activities_conversation_idx
    ON conversation_activities (conversation_id, id);
-- a retried post (same guid, same author, same conversation) finds the first one
CREATE UNIQUE INDEX conversation_activities_guid_key
    ON conversation_activities (conversation_id, actor_id, client_provided_guid)
    WHERE client_provided_guid IS NOT NULL;

CREATE TABLE group_chat_messages (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    body text NOT NULL,
    html text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX group_chat_messages_group_idx ON group_chat_messages (group_id, id);

-- Who reads the attachments of a remark (attachments.subject_type 'remark', subject_id the
-- activity) and of a chat message: the conversation's current members, the group's members.
CREATE FUNCTION attachment_readable_remark(
    p_activity_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM conversation_activities a
        JOIN conversation_members m ON m.conversation_id = a.conversation_id
        WHERE a.id = p_activity_id AND a.community_id = p_community_id
          AND m.user_id = p_viewer_id AND m.left_at IS NULL)
$$;

CREATE FUNCTION attachment_readable_chat_message(
    p_message_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM group_chat_messages c
        JOIN group_memberships gm ON gm.group_id = c.group_id
        WHERE c.id = p_message_id AND c.community_id = p_community_id
          AND gm.user_id = p_viewer_id)
$$;
