-- vak's shared store, version 3: write-ahead entries and the provider's call ids.
-- A call appends a `started` entry (kind 'started') to its node's chain before its tool runs; its
-- final record (kind 'record') follows under the same call_id. The provider's tool-call id (a
-- model's choice, which may repeat) is kept beside vak's own, so `vak audit show` finds a call by
-- either.
ALTER TABLE vak_records ADD COLUMN kind text NOT NULL DEFAULT 'record';
ALTER TABLE vak_records ADD COLUMN provider_call_id text;
UPDATE vak_records SET provider_call_id = record::jsonb ->> 'provider_call_id'
    WHERE strpos(record, '"provider_call_id"') > 0;
CREATE INDEX vak_records_provider_call ON vak_records (provider_call_id)
    WHERE provider_call_id IS NOT NULL;
