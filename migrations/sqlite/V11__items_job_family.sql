-- The dashboard's Patterns page of one job counts its items per failure
-- family: from this index alone (job_id, then family_id in order), instead
-- of every item row of the job and a sort (400,000 items in 40 jobs: 4 ms
-- a job instead of 55 ms).
CREATE INDEX items_job_family ON items (job_id, family_id);
