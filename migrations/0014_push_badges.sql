-- Push badges and silent badge updates (issue 12).
--
-- The badge itself (unread notifications + unread conversation remarks) is never stored: it is
-- counted when a push is claimed. What is stored is only what coalescing needs: a third kind
-- of job, 'badge', a silent update of one device's badge, at most one per device (the partial
-- unique index). Its payload is {"seq": reads so far, "sent_seq": seq when last sent}: a read
-- bumps seq; once sent, the job stays until PUSH_BADGE_INTERVAL_SECONDS later, and is then
-- sent again only if reads came in meanwhile (push/jobs.py).
ALTER TABLE push_jobs DROP CONSTRAINT push_jobs_kind_check;
ALTER TABLE push_jobs ADD CONSTRAINT push_jobs_kind_check
    CHECK (kind IN ('notification', 'remark', 'badge'));
CREATE UNIQUE INDEX push_jobs_badge_idx ON push_jobs (device_id) WHERE kind = 'badge';
