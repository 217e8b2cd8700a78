-- A per-user session epoch, stored in each session cookie when it is issued. Changing the
-- password or deactivating the user increments it, so every cookie issued before is refused
-- (a cookie is sealed on the client: it cannot be deleted from the server's side).
ALTER TABLE users ADD COLUMN session_epoch integer NOT NULL DEFAULT 0;
