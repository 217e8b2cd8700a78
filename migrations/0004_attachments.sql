-- Attachments: uploaded files, whose bytes live in the blob store (storage/blobs.py), and what
-- each was claimed by. An upload starts unclaimed (subject_type NULL); posting a message,
-- comment, remark or chat message with attachment_ids claims it (storage.attachments.claim),
-- and a profile photo is claimed by its user as 'avatar'. Image attachments (width and height
-- known) are the media files of what claims them.

CREATE TABLE attachments (
    id bigserial PRIMARY KEY,
    community_id bigint NOT NULL REFERENCES communities (id) ON DELETE CASCADE,
    uploader_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    filename text NOT NULL,
    content_type text NOT NULL,
    byte_size bigint NOT NULL CHECK (byte_size >= 0),
    storage_key text NOT NULL,
    -- displayed size of an image (after its Exif orientation); NULL for other files
    width integer,
    height integer,
    -- thumbnails made so far: {"stream": {"key", "content_type", "byte_size", "width",
    -- "height"}, ...}; made on first request (app.actions.attachments.variant_blob)
    thumbnails jsonb NOT NULL DEFAULT '{}'::jsonb,
    subject_type text CONSTRAINT attachments_subject_type_check
        CHECK (subject_type IN ('message', 'comment', 'remark', 'chat_message', 'avatar')),
    subject_id bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT attachments_subject_pair CHECK ((subject_type IS NULL) = (subject_id IS NULL)),
    CONSTRAINT attachments_image_size CHECK ((width IS NULL) = (height IS NULL))
);
CREATE UNIQUE INDEX attachments_storage_key_key ON attachments (storage_key);
CREATE INDEX attachments_uploader_idx ON attachments (community_id, uploader_id, id);
CREATE INDEX attachments_subject_idx ON attachments (subject_type, subject_id, id)
    WHERE subject_type IS NOT NULL;
-- unclaimed uploads, oldest first (for pruning abandoned uploads)
CREATE INDEX attachments_unclaimed_idx ON attachments (created_at) WHERE subject_type IS NULL;

-- May viewer p_viewer_id (p_external: an external contributor) read what claimed an
-- attachment? Dispatches to attachment_readable_<subject_type>(subject_id bigint,
-- community_id bigint, viewer_id bigint, external boolean) RETURNS boolean, which the
-- migration of each subject's table adds; while a subject type has no such function, the
-- answer is false (only the uploader reads such attachments). plpgsql, so that a function may
-- name tables that a later migration creates.
CREATE FUNCTION attachment_subject_readable(
    p_subject_type text, p_subject_id bigint, p_community_id bigint, p_viewer_id bigint,
    p_external boolean
) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
DECLARE
    ok boolean;
BEGIN
    IF p_subject_type IS NULL OR p_subject_type !~ '^[a-z_]+$' THEN
        RETURN false;
    END IF;
    IF to_regprocedure(format('attachment_readable_%s(bigint, bigint, bigint, boolean)',
                              p_subject_type)) IS NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('SELECT %I($1, $2, $3, $4)', 'attachment_readable_' || p_subject_type)
        INTO ok USING p_subject_id, p_community_id, p_viewer_id, p_external;
    RETURN coalesce(ok, false);
END
$$;

-- A profile photo is shown wherever its user is: everyone in the community reads it.
CREATE FUNCTION attachment_readable_avatar(
    p_user_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT true $$;

-- A message's attachments are read by whoever reads the message: in a group, its members,
-- and every internal user when the group is public (storage/group_visibility.py); without a
-- group, every internal user. The messages migration may refine this with CREATE OR REPLACE.
CREATE FUNCTION attachment_readable_message(
    p_message_id bigint, p_community_id bigint, p_viewer_id bigint, p_external boolean
) RETURNS boolean LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN EXISTS (
        SELECT 1 FROM messages m
        LEFT JOIN groups g ON g.id = m.group_id
        WHERE m.id = p_message_id AND m.community_id = p_community_id
          AND CASE
                WHEN m.group_id IS NULL THEN NOT p_external
                ELSE EXISTS (SELECT 1 FROM group_memberships gm
                             WHERE gm.group_id = m.group_id AND gm.user_id = p_viewer_id)
                     OR (NOT p_external AND g.permission = 'public')
              END
    );
END
$$;
