-- Follow counts kept, not counted (issue 13): every full form of a user (the directory, a
-- profile, userinfo) shows how many they follow and how many follow them, and counting cost a
-- read of every follow of the user: about 0.6 ms of PostgreSQL for a user followed by 10,000,
-- on each page that showed them. A read's cost must not grow with the community.
--
-- A table of their own without foreign keys, as migration 0021's versions: a follow locks no
-- users row (a provisioning upload holding a user's row does not hold up who follows them),
-- and the rows of a deleted user stay, harmless (ids are never reused; users are deleted only
-- with their community). A user without a row follows nobody and has no follower.
CREATE TABLE follow_counts (
    user_id bigint PRIMARY KEY,
    followers integer NOT NULL DEFAULT 0,
    following integer NOT NULL DEFAULT 0
);

-- Counted and kept in step from one moment: a follow or unfollow committed while the counts
-- are filled, before the trigger exists, would be missed for good (servers still running serve
-- while a new one migrates). Follows wait for this migration's commit; reads do not.
LOCK TABLE follows IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO follow_counts (user_id, followers, following)
SELECT user_id, sum(followers)::int, sum(following)::int FROM (
    SELECT followed_id AS user_id, count(*) AS followers, 0 AS following
    FROM follows GROUP BY followed_id
    UNION ALL
    SELECT follower_id, 0, count(*) FROM follows GROUP BY follower_id
) c GROUP BY user_id;

-- Deferred to the writer's COMMIT (its two rows are locked for the commit only), both rows in
-- the order of their ids: a follow of B by A and of A by B committing at once take them in the
-- same order, never in a cycle. Every follow and unfollow counts, cascades included.
CREATE FUNCTION follow_counted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    step integer := CASE WHEN TG_OP = 'INSERT' THEN 1 ELSE -1 END;
    follower bigint := CASE WHEN TG_OP = 'INSERT' THEN NEW.follower_id ELSE OLD.follower_id END;
    followed bigint := CASE WHEN TG_OP = 'INSERT' THEN NEW.followed_id ELSE OLD.followed_id END;
BEGIN
    INSERT INTO follow_counts AS c (user_id, followers, following)
    SELECT v.user_id, v.followers, v.following
    FROM (VALUES (followed, step, 0), (follower, 0, step)) AS v(user_id, followers, following)
    ORDER BY v.user_id
    ON CONFLICT (user_id) DO UPDATE
        SET followers = c.followers + EXCLUDED.followers,
            following = c.following + EXCLUDED.following;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER follows_counted
    AFTER INSERT OR DELETE ON follows DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION follow_counted();
