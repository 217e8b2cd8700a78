-- Directory identities of a user, as the original command-line client's `provision` sends
-- them: POST /api/users/provision matches users by unique identifier, then employee number,
-- then e-mail address. Each is unique within a community when present.
ALTER TABLE users ADD COLUMN unique_identifier text;
ALTER TABLE users ADD COLUMN employee_number text;
CREATE UNIQUE INDEX users_unique_identifier_key ON users (community_id, unique_identifier)
    WHERE unique_identifier IS NOT NULL;
CREATE UNIQUE INDEX users_employee_number_key ON users (community_id, employee_number)
    WHERE employee_number IS NOT NULL;
