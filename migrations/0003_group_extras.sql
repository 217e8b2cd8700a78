-- What groups need beyond 0002: unique group names, pending e-mail invitations, and the
-- per-member group chat read state and push switches (rendered by the group JSON, written by
-- the group chat code).

-- Group names are unique in a community, whatever their case (groupnames already are).
CREATE UNIQUE INDEX groups_name_key ON groups (community_id, lower(name));

-- add_members with {"email", "invite": "true"} for someone who is not yet a user: when a user
-- with that e-mail address is created, storage.memberships.accept_invitations turns each
-- invitation into a membership.
CREATE TABLE group_invitations (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    email text NOT NULL,
    role text NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member')),
    invited_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX group_invitations_email_key ON group_invitations (group_id, lower(email));
CREATE INDEX group_invitations_community_email_idx
    ON group_invitations (community_id, lower(email));

-- One row per member of a chat-enabled group, created when first written; a missing row means
-- "never viewed, no unread chats, every push switch on". It goes away with the membership.
CREATE TABLE group_chat_reads (
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL,
    user_id bigint NOT NULL,
    last_viewed_at timestamptz,
    unread_count integer NOT NULL DEFAULT 0 CHECK (unread_count >= 0),
    push_notifications_enabled boolean NOT NULL DEFAULT true,
    push_notification_on_group_chat_message boolean NOT NULL DEFAULT true,
    push_notification_on_chat_mention boolean NOT NULL DEFAULT true,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, user_id),
    FOREIGN KEY (group_id, user_id) REFERENCES group_memberships (group_id, user_id)
        ON DELETE CASCADE
);

-- Lists of a group's pending requests, oldest first.
CREATE INDEX group_membership_requests_group_idx
    ON group_membership_requests (group_id, created_at, id);
-- A user's pinned groups.
CREATE INDEX group_pins_user_idx ON group_pins (user_id, created_at);
