-- Notifications, client devices (push registrations) and the durable push job queue.
--
-- A notification is one row per recipient. notifiable_type/notifiable_id name what it is about
-- as the API shows it (Message, Comment, User, Thanks, Group); message_id, comment_id and
-- group_id are the same subject as foreign keys, so that deleting a message, a comment or a
-- group deletes the notifications about it (no notification ever points at something gone or
-- keeps showing the text of something deleted). notifiable_url is a path under the community's
-- base URL ("/messages/12-title"): the base is added when rendering, like every other URL.

CREATE TABLE notifications (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- null only for something no user did (a change made by the command line or a job)
    sent_by_user_id bigint REFERENCES users (id) ON DELETE CASCADE,
    notifiable_type text NOT NULL,
    notifiable_id bigint NOT NULL,
    notifiable_text text,
    notifiable_url text NOT NULL,
    filter text NOT NULL CHECK (filter IN ('thanks', 'groups', 'at_mentions', 'broadcast',
                                           'replies', 'projects', 'followers', 'town_halls')),
    verb text NOT NULL,
    read boolean NOT NULL DEFAULT false,
    message_id bigint REFERENCES messages (id) ON DELETE CASCADE,
    comment_id bigint REFERENCES comments (id) ON DELETE CASCADE,
    group_id bigint REFERENCES groups (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    CHECK (user_id IS DISTINCT FROM sent_by_user_id)
);
-- the list, most recent first, and its filtered form
CREATE INDEX notifications_user_idx ON notifications (user_id, id DESC);
CREATE INDEX notifications_user_filter_idx ON notifications (user_id, filter, id DESC);
-- unread counts and mark_all_read touch only the unread rows
CREATE INDEX notifications_unread_idx ON notifications (user_id, filter) WHERE NOT read;
-- the cascades above
CREATE INDEX notifications_message_idx ON notifications (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX notifications_comment_idx ON notifications (comment_id) WHERE comment_id IS NOT NULL;
CREATE INDEX notifications_group_idx ON notifications (group_id) WHERE group_id IS NOT NULL;

-- A device registered for push. One row per (community, token, notification_type): the same
-- token registered again, by anyone in the community, updates that row (the device now belongs
-- to whoever registered it last, so the previous user stops getting pushes on it).
-- platform: apns or fcm, from client_device[platform] or guessed from the token's shape.
CREATE TABLE client_devices (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    registration_id text NOT NULL CHECK (length(registration_id) BETWEEN 1 AND 4096),
    notification_type text NOT NULL DEFAULT 'main'
        CHECK (notification_type IN ('main', 'conversations')),
    platform text NOT NULL CHECK (platform IN ('apns', 'fcm')),
    push_enabled boolean NOT NULL DEFAULT true,
    push_mentions boolean NOT NULL DEFAULT true,
    push_announcements boolean NOT NULL DEFAULT true,
    push_replies boolean NOT NULL DEFAULT true,
    push_conversation_activity boolean NOT NULL DEFAULT true,
    os_version text,
    client_version text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (community_id, registration_id, notification_type)
);
CREATE INDEX client_devices_user_idx ON client_devices (user_id, notification_type);

-- Durable push jobs: one per (thing to announce, device). Inserted in the transaction that makes
-- the change, so a job exists exactly when the change committed; `commons worker` claims due
-- jobs with FOR UPDATE SKIP LOCKED, moving next_attempt_at forward by a lease (a worker that
-- dies mid-send leaves the job to be claimed again once the lease is over), then deletes the
-- job when it is done, or moves next_attempt_at to the next retry.
-- payload: {"title", "body", "data": {...}, "check": {...}}; "check" is what the worker
-- re-reads before sending (the notification still unread, the remark still unacknowledged).
CREATE TABLE push_jobs (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    device_id bigint NOT NULL REFERENCES client_devices (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('notification', 'remark')),
    payload jsonb NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_jobs_due_idx ON push_jobs (next_attempt_at, id);
CREATE INDEX push_jobs_device_idx ON push_jobs (device_id);
