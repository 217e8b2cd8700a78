-- A version of each user's row and custom field values (issue 13): the users list pages (the
-- directory, search, employees) keep each user's full JSON under it (app/actions/users.py),
-- so that a page whose users are all kept reads their ids, versions and follow counts only,
-- not the wide rows with their JSON.
--
-- users.row_version: bumped by every UPDATE of the row (a BEFORE trigger: the row is being
-- written anyway, nothing else is locked); custom_value_versions: by any change of the user's
-- custom field values. What a full form shows of other rows is versioned elsewhere: the
-- manager's embedded columns and the custom fields' names and order by directory_versions
-- (migration 0021, bumped here for custom fields too), the follow counts and the viewer's
-- follow are columns of the page's statement itself.
ALTER TABLE users ADD COLUMN row_version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION bump_user_row_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.row_version := OLD.row_version + 1;
    RETURN NEW;
END $$;

CREATE TRIGGER users_row_version BEFORE UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION bump_user_row_version();

-- A user's custom values have a version of their own, in a table without foreign keys, as
-- migration 0021's: bumped by a deferred trigger inside the writer's COMMIT, it locks no users
-- row (a profile edit holding its user's row while a field is deleted would deadlock with it),
-- once per run of one user's values in a transaction (a provisioning upload writes a user's
-- values one after the other). A user without a row is at version 0.
CREATE TABLE custom_value_versions (
    user_id bigint PRIMARY KEY,
    version bigint NOT NULL
);

CREATE FUNCTION bump_custom_value_version(owner bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('commons.custom_values_bumped', true), '') <> owner::text THEN
        PERFORM set_config('commons.custom_values_bumped', owner::text, true);
        INSERT INTO custom_value_versions AS v (user_id, version) VALUES (owner, 1)
        ON CONFLICT (user_id) DO UPDATE SET version = v.version + 1;
    END IF;
END $$;

CREATE FUNCTION custom_value_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        PERFORM bump_custom_value_version(OLD.user_id);
    END IF;
    IF TG_OP = 'INSERT' OR (TG_OP = 'UPDATE' AND NEW.user_id <> OLD.user_id) THEN
        PERFORM bump_custom_value_version(NEW.user_id);
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER custom_field_values_version
    AFTER INSERT OR UPDATE ON custom_field_values DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION custom_value_changed();
-- Not the values deleted with their field (its own trigger below bumps the directory once) or
-- with their user (gone): pg_trigger_depth() is 0 only for a statement of the application.
CREATE CONSTRAINT TRIGGER custom_field_values_version_delete
    AFTER DELETE ON custom_field_values DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION custom_value_changed();

-- A field's name and order show in every full form with a value of it, and so does the field
-- itself until it is deleted.
CREATE CONSTRAINT TRIGGER custom_fields_directory_version
    AFTER UPDATE OF name, position ON custom_fields DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN ((OLD.name, OLD.position) IS DISTINCT FROM (NEW.name, NEW.position))
    EXECUTE FUNCTION directory_row_changed();
CREATE CONSTRAINT TRIGGER custom_fields_directory_version_delete
    AFTER DELETE ON custom_fields DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION directory_row_changed();

-- The directory's pages in users' id order within their community: with only
-- users_community_state_idx, `state = ANY(...)` kept the planner on the primary key, filtering
-- out every other community's users first (about 9 ms for the first page of the third of
-- three communities of 30,000 users; 0.35 ms with this index).
CREATE INDEX users_community_id_idx ON users (community_id, id);
