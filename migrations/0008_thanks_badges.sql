-- Badges and thanks, content filters, meeting types and meetings, and what topics pages need.
--
-- Default sets (badges, meeting types) are made per community by the functions below: the
-- community creation action calls them (storage.badges.create_default_badges,
-- storage.meetings.create_default_meeting_types), and this migration runs them once for the
-- communities that already exist. Changing a default set means a new migration that replaces
-- the function.

CREATE TABLE badges (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    -- names the image set app/static/badges/<image_key>_square{30,45,70,140}.png
    image_key text NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    position integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX badges_name_key ON badges (community_id, lower(name));
CREATE INDEX badges_community_idx ON badges (community_id, position, id);

CREATE FUNCTION commons_create_default_badges(p_community_id bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO badges (community_id, image_key, name, description, position)
    SELECT p_community_id, d.image_key, d.name, d.description, d.position
    FROM (VALUES
        ('thank_you', 'Thank You', 'For help, kindness and a job well done.', 1),
        ('team_player', 'Team Player', 'Puts the team first and lifts everyone around.', 2),
        ('above_and_beyond', 'Above and Beyond', 'Went far past what was asked.', 3),
        ('innovator', 'Innovator', 'A new idea that made things better.', 4),
        ('problem_solver', 'Problem Solver', 'Untangled something hard.', 5),
        ('customer_hero', 'Customer Hero', 'Made a customer''s day.', 6)
    ) AS d (image_key, name, description, position)
    ON CONFLICT DO NOTHING
$$;

SELECT commons_create_default_badges(id) FROM communities;

-- A thanks: its sender, an optional badge, the body, and the broadcast message announcing it.
CREATE TABLE thanks (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    badge_id bigint REFERENCES badges (id) ON DELETE SET NULL,
    body text NOT NULL,
    -- the announcement (a message of message_type 'thanks'); null once that message is gone
    message_id bigint REFERENCES messages (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX thanks_community_idx ON thanks (community_id, created_at DESC, id DESC);
CREATE INDEX thanks_badge_idx ON thanks (badge_id, created_at DESC, id DESC);
CREATE INDEX thanks_user_idx ON thanks (user_id);
CREATE UNIQUE INDEX thanks_message_key ON thanks (message_id) WHERE message_id IS NOT NULL;

CREATE TABLE thanks_recipients (
    thanks_id bigint NOT NULL REFERENCES thanks (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    position integer NOT NULL,
    PRIMARY KEY (thanks_id, user_id)
);
CREATE INDEX thanks_recipients_user_idx ON thanks_recipients (user_id, thanks_id);

-- Words a community's admins block in what members post (whole words, any letter case).
CREATE TABLE content_filters (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    word text NOT NULL,
    creator_id bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX content_filters_word_key ON content_filters (community_id, lower(word));

-- The kinds of meeting a community offers (GET /api/meetings), and the meetings made.
CREATE TABLE meeting_types (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    key text NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    default_duration_minutes integer NOT NULL DEFAULT 60 CHECK (default_duration_minutes > 0),
    position integer NOT NULL DEFAULT 0,
    enabled boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX meeting_types_key ON meeting_types (community_id, key);

CREATE FUNCTION commons_create_default_meeting_types(p_community_id bigint) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO meeting_types (community_id, key, name, description,
                               default_duration_minutes, position)
    SELECT p_community_id, d.key, d.name, d.description, d.minutes, d.position
    FROM (VALUES
        ('in_person', 'In person', 'Meet in a room; say where in the location.', 60, 1),
        ('video_call', 'Video call', 'Meet over video; put the link in the location.', 30, 2),
        ('phone_call', 'Phone call', 'Meet by phone; put the number in the location.', 30, 3),
        ('town_hall', 'Town hall', 'A company-wide meeting with questions from everyone.', 60, 4)
    ) AS d (key, name, description, minutes, position)
    ON CONFLICT DO NOTHING
$$;

SELECT commons_create_default_meeting_types(id) FROM communities;

CREATE TABLE meetings (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    meeting_type_id bigint NOT NULL REFERENCES meeting_types (id) ON DELETE RESTRICT,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    group_id bigint REFERENCES groups (id) ON DELETE CASCADE,
    title text NOT NULL,
    description text NOT NULL DEFAULT '',
    location text NOT NULL DEFAULT '',
    starts_at timestamptz NOT NULL,
    ends_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (ends_at > starts_at)
);
CREATE INDEX meetings_community_idx ON meetings (community_id, starts_at);
CREATE INDEX meetings_group_idx ON meetings (group_id) WHERE group_id IS NOT NULL;

CREATE TABLE meeting_attendees (
    meeting_id bigint NOT NULL REFERENCES meetings (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    position integer NOT NULL,
    PRIMARY KEY (meeting_id, user_id)
);
CREATE INDEX meeting_attendees_user_idx ON meeting_attendees (user_id, meeting_id);

-- Topic pages (POST /api/topics, GET /api/topics/:id): the topics table belongs to the feed
-- (0005). A topic made through POST /api/topics is `listed`: everyone sees it, even before a
-- message uses it. Any other topic exists because a message used its #tag, and is seen only
-- by who may read one of those messages (a tag used only in a private group stays there).
ALTER TABLE topics ADD COLUMN listed boolean NOT NULL DEFAULT false;
-- word-prefix search on names (GET /api/topics/search, suggestions)
CREATE INDEX topics_name_prefix_idx ON topics (community_id, name text_pattern_ops);
