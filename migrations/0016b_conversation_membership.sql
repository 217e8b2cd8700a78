-- Conversations follow decisions.md: `private` is true exactly when there are two members;
-- a one-to-one conversation can grow (and shrink back); reuse finds the most recently active
-- conversation with exactly the requested member set, however it came to have it.
--
-- Several conversations may now hold one member set, so the key is no longer unique (creation
-- is serialized per key with an advisory lock instead).
DROP INDEX conversations_member_set_key;
CREATE INDEX conversations_member_set_key
    ON conversations (community_id, member_set_key, last_activity_at DESC)
    WHERE member_set_key IS NOT NULL;

-- The newest activity of a conversation's one-to-one past: members added since see only what
-- comes after it (visible_from_activity_id); the two who were there see everything.
ALTER TABLE conversations ADD COLUMN private_history_end bigint NOT NULL DEFAULT 0;
ALTER TABLE conversation_members ADD COLUMN visible_from_activity_id bigint NOT NULL DEFAULT 0;

-- Existing conversations: private from the member count, and keys that follow it (the key is
-- 'p:' or 's:' and the SHA-256 of the sorted member ids, as storage.conversations computes it).
UPDATE conversations c
SET private = (s.n = 2),
    member_set_key = CASE WHEN s.n = 2 THEN 'p:' ELSE 's:' END
        || encode(sha256(convert_to(s.ids, 'UTF8')), 'hex')
FROM (SELECT conversation_id, count(*) AS n,
             string_agg(user_id::text, ',' ORDER BY user_id) AS ids
      FROM conversation_members WHERE left_at IS NULL GROUP BY conversation_id) s
WHERE s.conversation_id = c.id;
