-- A version of each user's row and custom field values (issue 13): the users list pages (the
-- directory, search, employees) keep each user's full JSON under it (app/actions/users.py),
-- so that a page whose users are all kept reads their ids, versions and follow counts only,
-- not the wide rows with their JSON.
--
-- users.row_version: bumped by every UPDATE of the row (a BEFORE trigger: the row is being
-- written anyway, nothing else is locked), and at COMMIT by any change of the user's custom
-- field values. What a full form shows of other rows is versioned elsewhere: the manager's
-- embedded columns and a custom field's name or order by directory_versions (migration 0021,
-- bumped here for custom fields too), the follow counts and the viewer's follow are columns of
-- the page's statement itself.
ALTER TABLE users ADD COLUMN row_version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION bump_user_row_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.row_version = OLD.row_version THEN
        NEW.row_version := OLD.row_version + 1;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER users_row_version BEFORE UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION bump_user_row_version();

-- Deferred, as migration 0021's bumps: the user's row is locked for the commit only (an
-- upload of many users' values does not take their rows one by one across round trips).
CREATE FUNCTION custom_value_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        UPDATE users SET row_version = row_version + 1 WHERE id = OLD.user_id;
    END IF;
    IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.user_id <> OLD.user_id) THEN
        UPDATE users SET row_version = row_version + 1 WHERE id = NEW.user_id;
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER custom_field_values_user_version
    AFTER INSERT OR UPDATE OR DELETE ON custom_field_values DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION custom_value_changed();

-- A field's name and order show in every full form with a value of it (a field deleted takes
-- its values with it: those bump their users above).
CREATE CONSTRAINT TRIGGER custom_fields_directory_version
    AFTER UPDATE OF name, position ON custom_fields DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN ((OLD.name, OLD.position) IS DISTINCT FROM (NEW.name, NEW.position))
    EXECUTE FUNCTION directory_row_changed();
