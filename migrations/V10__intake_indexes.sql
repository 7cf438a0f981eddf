-- vnfkeeper state database: indexes for the intake table's lookups by file and by instance.
-- Never edit this file once released; add a new V<n>__*.sql instead.
--
-- `intake` grows by one row per spool file for the life of the database. Two lookups read it
-- besides the duplicate check (`intake_by_sha`): a task verb polls for the outcome of the file it
-- submitted (by `file_name`, several times a second), and `vnfkeeper events VNF` reads one
-- instance's requests (by `vnf_instance_id`). Without these each was a scan of the whole table.
CREATE INDEX intake_by_file ON intake (file_name);
CREATE INDEX intake_by_instance ON intake (vnf_instance_id, id);
