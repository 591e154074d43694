-- vak's shared store, version 6: the filters of `vak audit serve`'s calls list, each an index
-- that lists its calls newest committed first, so that a page of a rare tool, stage,
-- principal or session reads that page's rows, not the whole journal back to them.
CREATE INDEX vak_records_tool_gseq ON vak_records (tool, gseq);
CREATE INDEX vak_records_stage_gseq ON vak_records (stage, gseq);
CREATE INDEX vak_records_principal_gseq ON vak_records (principal, gseq);
CREATE INDEX vak_records_session_gseq ON vak_records (session_id, gseq);
