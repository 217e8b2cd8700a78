-- Communities (tenants), users, follows and custom profile fields.
-- Every table carries community_id; every lookup by id filters on it.

CREATE TABLE communities (
    id bigserial PRIMARY KEY,
    name text NOT NULL,
    domain text NOT NULL,
    base_url text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX communities_domain_key ON communities (lower(domain));

CREATE TABLE users (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    email text NOT NULL,
    username text NOT NULL,
    first_name text NOT NULL DEFAULT '',
    last_name text NOT NULL DEFAULT '',
    password_hash text,
    role text NOT NULL DEFAULT 'member'
        CHECK (role IN ('member', 'tenant_admin', 'external_contributor')),
    state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'inactive', 'terminated')),
    title text,
    company_login text,
    manager_id bigint REFERENCES users (id) ON DELETE SET NULL,
    status_message text,
    out_of_office boolean NOT NULL DEFAULT false,
    back_in_office_on date,
    contact_info jsonb NOT NULL DEFAULT '{}'::jsonb,
    avatar_id bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_manager_not_self CHECK (manager_id IS NULL OR manager_id <> id)
);
CREATE UNIQUE INDEX users_email_key ON users (community_id, lower(email));
CREATE UNIQUE INDEX users_username_key ON users (community_id, lower(username));
CREATE UNIQUE INDEX users_company_login_key ON users (community_id, lower(company_login))
    WHERE company_login IS NOT NULL;
CREATE INDEX users_community_state_idx ON users (community_id, state, id);
CREATE INDEX users_manager_idx ON users (manager_id) WHERE manager_id IS NOT NULL;
-- word-prefix search over names, username and e-mail
CREATE INDEX users_search_idx ON users USING gin (
    to_tsvector('simple', first_name || ' ' || last_name || ' ' || username || ' ' || email)
);

CREATE TABLE follows (
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    follower_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    followed_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (follower_id, followed_id),
    CHECK (follower_id <> followed_id)
);
CREATE INDEX follows_followed_idx ON follows (followed_id, follower_id);

CREATE TABLE custom_fields (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    name text NOT NULL,
    position integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX custom_fields_name_key ON custom_fields (community_id, lower(name));

CREATE TABLE custom_field_values (
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    custom_field_id bigint NOT NULL REFERENCES custom_fields (id) ON DELETE CASCADE,
    value text NOT NULL,
    PRIMARY KEY (user_id, custom_field_id)
);
