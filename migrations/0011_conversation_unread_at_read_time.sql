-- A member's unread remarks are counted when read (remarks by others after
-- last_read_activity_id, over conversation_activities (conversation_id, id)), so posting a
-- remark no longer rewrites a row per member of the conversation.
ALTER TABLE conversation_members DROP COLUMN unread_count;
