-- Group chat push (issues 12 and 14): a chat message writes ONE row here in its own transaction,
-- whatever the group's size; `commons worker` fans it out into push_jobs (kind 'chat', one per
-- member's device whose settings allow it), a chunk of members per transaction, moving
-- after_user_id forward in the same transaction, so that each member is fanned out exactly once
-- even if a worker dies in the middle. The row is deleted with its last chunk.
-- payload: {"title", "mention_title", "body", "data", "thread"}; mentions: the lower-case
-- usernames @mentioned by the message.
CREATE TABLE push_chat_fanouts (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    group_id bigint NOT NULL REFERENCES groups (id) ON DELETE CASCADE,
    chat_message_id bigint NOT NULL REFERENCES group_chat_messages (id) ON DELETE CASCADE,
    author_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    mentions text[] NOT NULL DEFAULT '{}',
    payload jsonb NOT NULL,
    after_user_id bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- No index besides the key: rows live until the worker gets to them (seconds), so the cascades
-- above scan a table that is nearly empty, and a chat message pays for one index entry only.

ALTER TABLE push_jobs DROP CONSTRAINT push_jobs_kind_check;
ALTER TABLE push_jobs ADD CONSTRAINT push_jobs_kind_check
    CHECK (kind IN ('notification', 'remark', 'badge', 'chat'));
