-- vak's shared store, version 2: reservations in batches. A node takes every reservation waiting
-- and admits them in one statement (one transaction, one commit), as its journal writer does with
-- records. Sessions are locked in name order, as the journal's charges are, so two nodes' batches
-- never wait on each other in a cycle; each reservation is `vak_reserve`, unchanged.
CREATE FUNCTION vak_reserve_batch(
    p_sessions text[], p_principals text[], p_tools text[],
    p_calls_caps bigint[], p_fuel_caps bigint[], p_wall_caps bigint[], p_result_caps bigint[],
    p_tool_caps bigint[],
    p_fuel bigint[], p_wall bigint[], p_result bigint[])
RETURNS TABLE (i integer, refusal text, resource text, lim bigint, used bigint, reserved bigint,
               fuel bigint, wall bigint, result_bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    k integer;
BEGIN
    FOR k IN SELECT o::integer FROM unnest(p_sessions) WITH ORDINALITY AS t(s, o) ORDER BY s, o
    LOOP
        RETURN QUERY SELECT k, r.* FROM vak_reserve(
            p_sessions[k], p_principals[k], p_tools[k],
            p_calls_caps[k], p_fuel_caps[k], p_wall_caps[k], p_result_caps[k], p_tool_caps[k],
            p_fuel[k], p_wall[k], p_result[k]) AS r;
    END LOOP;
END
$$;
