-- Who submitted a spool file: the owner of the file as intake opened it (fstat(2) on the
-- descriptor it read), and that uid's user name from the password database at intake (NULL when
-- the uid has no name there). NULL for rows written before this version and for requests that
-- did not come from the spool. Never edit this file once released; add V20__*.sql instead.
ALTER TABLE intake ADD COLUMN submitter_uid INTEGER;
ALTER TABLE intake ADD COLUMN submitter_name TEXT;
-- What the submitting command labelled the file with (extended attribute
-- `user.vnfkeeper.submit`): the operator's file name, and `SUDO_USER` (kept only for a file owned
-- by root). NULL when the file carried no label.
ALTER TABLE intake ADD COLUMN submitter_sudo_user TEXT;
ALTER TABLE intake ADD COLUMN submitted_file TEXT;
