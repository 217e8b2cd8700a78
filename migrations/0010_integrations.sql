-- Integrations: external (business) systems with their API client credentials, reach
-- extensions (embeddable widgets of an external system), and incoming group webhooks.
--
-- Secrets (an external system's client secret, a webhook's secret) are random 256-bit values
-- shown once, when made, and kept here only as their SHA-256 (hex): they are not passwords, so
-- a slow hash would only slow every webhook call down without making them harder to guess.

CREATE TABLE external_systems (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    name text NOT NULL,
    description text,
    -- the system's own address (rendered as `system_url`)
    system_url text NOT NULL,
    state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'inactive')),
    external_system_type text NOT NULL DEFAULT 'html'
        CHECK (external_system_type IN ('html', 'sharepoint', 'google_gadget')),
    sharepoint_version text CHECK (sharepoint_version IN ('2007', '2010')),
    not_in_company_stream boolean NOT NULL DEFAULT false,
    -- an uploaded profile photo (an attachment claimed as 'avatar' with subject_id = this id)
    avatar_id bigint REFERENCES attachments (id) ON DELETE SET NULL,
    -- a picture address given instead of an upload: stored as given, never fetched
    profile_photo_url text,
    client_identifier text NOT NULL,
    client_secret_hash text NOT NULL,
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT external_systems_sharepoint_version
        CHECK (sharepoint_version IS NULL OR external_system_type = 'sharepoint')
);
CREATE UNIQUE INDEX external_systems_client_identifier_key
    ON external_systems (client_identifier);
CREATE INDEX external_systems_community_idx ON external_systems (community_id, id);

CREATE TABLE reach_extensions (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    external_system_id bigint NOT NULL REFERENCES external_systems (id) ON DELETE CASCADE,
    name text NOT NULL,
    -- the container (container_type Group): the only kind of container this service has
    group_id bigint REFERENCES groups (id) ON DELETE SET NULL,
    extension_type text NOT NULL DEFAULT 'discussion'
        CHECK (extension_type IN ('discussion', 'stream', 'recommend', 'trends', 'dynamic',
                                  'recent_thanks')),
    stream_type text
        CHECK (stream_type IN ('profile', 'company', 'group', 'town_hall', 'custom', 'home',
                               'default')),
    button_type text CHECK (button_type IN ('verb', 'icon', 'icon_and_verb')),
    install_type text NOT NULL DEFAULT 'html'
        CHECK (install_type IN ('html', 'sharepoint', 'google_gadget')),
    state text NOT NULL DEFAULT 'active' CHECK (state IN ('active')),
    button_verb text NOT NULL DEFAULT 'recommend'
        CHECK (button_verb IN ('help', 'recommend', 'review', 'share', 'thanks', 'ask_for_help',
                               'request_assistance')),
    -- reach_extension[profile_header]; NULL while never given (a profile stream needs it)
    profile_heading boolean,
    days_ago integer NOT NULL DEFAULT 7 CHECK (days_ago BETWEEN 1 AND 365),
    login_required boolean NOT NULL DEFAULT true,
    -- the embed script's token
    token text NOT NULL,
    reach_border_style text NOT NULL DEFAULT 'solid'
        CHECK (reach_border_style IN ('none', 'solid', 'dotted', 'dashed', 'double')),
    reach_border_color text NOT NULL DEFAULT '#cccccc',
    reach_poweredby_bg text NOT NULL DEFAULT '#f2f2f2',
    reach_entry_border_color text NOT NULL DEFAULT '#e5e5e5',
    reach_comment_bg text NOT NULL DEFAULT '#f7f7f7',
    reach_default_text text NOT NULL DEFAULT '#333333',
    reach_secondary_text text NOT NULL DEFAULT '#777777',
    reach_default_link text NOT NULL DEFAULT '#1a6fb5',
    reach_secondary_link text NOT NULL DEFAULT '#5a8fc2',
    reach_button_border text NOT NULL DEFAULT '#1a5a96',
    reach_button_color text NOT NULL DEFAULT '#ffffff',
    reach_button_bgcolor text NOT NULL DEFAULT '#2a7dc9',
    reach_button_inner_border text NOT NULL DEFAULT '#4d97da',
    reach_button_border_hover text NOT NULL DEFAULT '#134a7c',
    reach_button_bgcolor_hover text NOT NULL DEFAULT '#1f6bb0',
    reach_button_textshadow text NOT NULL DEFAULT '#134a7c',
    reach_social_button_border text NOT NULL DEFAULT '#cccccc',
    reach_social_button_text text NOT NULL DEFAULT '#333333',
    reach_social_button_background text NOT NULL DEFAULT '#f5f5f5',
    reach_separator_color text NOT NULL DEFAULT '#e5e5e5',
    -- the filters of a custom stream (tag names, or user ids; never both)
    tag_filters text[] NOT NULL DEFAULT '{}',
    user_filter_ids bigint[] NOT NULL DEFAULT '{}',
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reach_extensions_one_filter_kind
        CHECK (cardinality(tag_filters) = 0 OR cardinality(user_filter_ids) = 0),
    CONSTRAINT reach_extensions_colors CHECK (
        reach_border_color ~ '^#[0-9a-f]{6}$' AND reach_poweredby_bg ~ '^#[0-9a-f]{6}$'
        AND reach_entry_border_color ~ '^#[0-9a-f]{6}$' AND reach_comment_bg ~ '^#[0-9a-f]{6}$'
        AND reach_default_text ~ '^#[0-9a-f]{6}$' AND reach_secondary_text ~ '^#[0-9a-f]{6}$'
        AND reach_default_link ~ '^#[0-9a-f]{6}$' AND reach_secondary_link ~ '^#[0-9a-f]{6}$'
        AND reach_button_border ~ '^#[0-9a-f]{6}$' AND reach_button_color ~ '^#[0-9a-f]{6}$'
        AND reach_button_bgcolor ~ '^#[0-9a-f]{6}$'
        AND reach_button_inner_border ~ '^#[0-9a-f]{6}$'
        AND reach_button_border_hover ~ '^#[0-9a-f]{6}$'
        AND reach_button_bgcolor_hover ~ '^#[0-9a-f]{6}$'
        AND reach_button_textshadow ~ '^#[0-9a-f]{6}$'
        AND reach_social_button_border ~ '^#[0-9a-f]{6}$'
        AND reach_social_button_text ~ '^#[0-9a-f]{6}$'
        AND reach_social_button_background ~ '^#[0-9a-f]{6}$'
        AND reach_separator_color ~ '^#[0-9a-f]{6}$'
    )
);
CREATE UNIQUE INDEX reach_extensions_token_key ON reach_extensions (token);
CREATE INDEX reach_extensions_community_idx ON reach_extensions (community_id, id);
CREATE INDEX reach_extensions_system_idx ON reach_extensions (external_system_id);

-- An incoming webhook of a group: POST /api/webhooks/<identifier>/<secret> posts a message in
-- the group as the webhook's creator.
CREATE TABLE group_webhooks (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    name text NOT NULL,
    identifier text NOT NULL,
    secret_hash text NOT NULL,
    created_by bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX group_webhooks_identifier_key ON group_webhooks (identifier);
CREATE INDEX group_webhooks_group_idx ON group_webhooks (community_id, group_id, id);
