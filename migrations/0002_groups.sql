-- Groups, memberships, membership requests, pins, and streams (each group has its stream).

CREATE TABLE groups (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    name text NOT NULL,
    groupname text NOT NULL,
    description text,
    permission text NOT NULL DEFAULT 'public'
        CHECK (permission IN ('public', 'private', 'external_contributor')),
    allow_access_request boolean NOT NULL DEFAULT false,
    chat_enabled boolean NOT NULL DEFAULT false,
    post_enabled boolean NOT NULL DEFAULT true,
    state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'archived')),
    group_type text NOT NULL DEFAULT 'standard',
    avatar_id bigint,
    creator_id bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    archived_at timestamptz
);
CREATE UNIQUE INDEX groups_groupname_key ON groups (community_id, lower(groupname));
CREATE INDEX groups_community_idx ON groups (community_id, id);
CREATE INDEX groups_name_search_idx ON groups USING gin (to_tsvector('simple', name));

CREATE TABLE group_memberships (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL DEFAULT 'member' CHECK (role IN ('admin', 'member')),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (group_id, user_id)
);
CREATE INDEX group_memberships_user_idx ON group_memberships (user_id, group_id);

CREATE TABLE group_membership_requests (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (group_id, user_id)
);

CREATE TABLE group_pins (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, group_id)
);

-- Streams: the system streams of each user are created on demand by the messages code;
-- a group's stream (kind 'group') is created with the group, its chat stream (kind
-- 'group_chat') when chat is enabled.
CREATE TABLE streams (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('home', 'mentions', 'bookmarked', 'sent', 'company',
                                       'group', 'group_chat', 'custom')),
    group_id bigint REFERENCES groups (id) ON DELETE CASCADE,
    user_id bigint REFERENCES users (id) ON DELETE CASCADE,
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX streams_group_kind_key ON streams (group_id, kind) WHERE group_id IS NOT NULL;
CREATE UNIQUE INDEX streams_user_kind_key ON streams (user_id, kind)
    WHERE user_id IS NOT NULL AND kind <> 'custom';
