-- vak's shared store, version 4: a node's name is held by one process at a time (a lease), and
-- each node says which revocations it has applied (the barrier `vak revoke` waits on).
-- `holder` is the process holding the name (NULL: free), `holder_info` says who it is (pid, host)
-- for messages; `heartbeat_at` is renewed by the node's revocation listener after each read it
-- applied, with `revocation_ack`, the highest revocation id in force on the node. The lease lapses
-- `lease_ms` after the last heartbeat; the node refuses calls `stale_ms` after it (its view of the
-- revocations is then too old to tell), so `stale_ms` <= `lease_ms`.
ALTER TABLE vak_nodes ADD COLUMN holder text;
ALTER TABLE vak_nodes ADD COLUMN holder_info text;
ALTER TABLE vak_nodes ADD COLUMN heartbeat_at timestamptz;
ALTER TABLE vak_nodes ADD COLUMN lease_ms bigint;
ALTER TABLE vak_nodes ADD COLUMN stale_ms bigint;
ALTER TABLE vak_nodes ADD COLUMN revocation_ack bigint NOT NULL DEFAULT 0;

-- Reservation batches a node may give up on. A node that got no answer to a batch (the database
-- hung, the connection broke) cannot tell whether it landed, and its calls were already refused:
-- whatever it reserved must be given back, and only once. Each batch commits a row here in its
-- own transaction, with what it granted; a node giving a batch up inserts the row first if the
-- batch has not (then the batch, should it run later, rolls back and reserves nothing), or
-- releases what the batch granted (`released` makes that happen once).
CREATE TABLE vak_reserve_fence (
    batch        text PRIMARY KEY,
    node         text NOT NULL,
    landed       boolean NOT NULL,
    released     boolean NOT NULL DEFAULT false,
    sessions     text[],
    tools        text[],
    tool_capped  boolean[],
    fuel         bigint[],
    wall         bigint[],
    result_bytes bigint[],
    at           timestamptz NOT NULL DEFAULT now()
);

-- `vak_reserve_batch`, fenced: the batch's reservations commit only with its row above.
CREATE FUNCTION vak_reserve_fenced(
    p_batch text, p_node text, p_sessions text[], p_principals text[], p_tools text[],
    p_calls_caps bigint[], p_fuel_caps bigint[], p_wall_caps bigint[],
    p_result_caps bigint[], p_tool_caps bigint[], p_fuel bigint[], p_wall bigint[],
    p_result bigint[])
RETURNS TABLE (i integer, refusal text, resource text, lim bigint, used bigint,
               reserved bigint, fuel bigint, wall bigint, result_bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    g_sessions text[] := '{}';
    g_tools text[] := '{}';
    g_capped boolean[] := '{}';
    g_fuel bigint[] := '{}';
    g_wall bigint[] := '{}';
    g_result bigint[] := '{}';
BEGIN
    FOR r IN SELECT * FROM vak_reserve_batch(p_sessions, p_principals, p_tools, p_calls_caps,
                 p_fuel_caps, p_wall_caps, p_result_caps, p_tool_caps, p_fuel, p_wall, p_result)
    LOOP
        IF r.refusal IS NULL THEN
            g_sessions := g_sessions || p_sessions[r.i];
            g_tools := g_tools || p_tools[r.i];
            g_capped := g_capped || (p_tool_caps[r.i] IS NOT NULL);
            g_fuel := g_fuel || r.fuel;
            g_wall := g_wall || r.wall;
            g_result := g_result || r.result_bytes;
        END IF;
        i := r.i; refusal := r.refusal; resource := r.resource; lim := r.lim; used := r.used;
        reserved := r.reserved; fuel := r.fuel; wall := r.wall; result_bytes := r.result_bytes;
        RETURN NEXT;
    END LOOP;
    INSERT INTO vak_reserve_fence AS f (batch, node, landed, sessions, tools, tool_capped, fuel,
                                        wall, result_bytes)
        VALUES (p_batch, p_node, true, g_sessions, g_tools, g_capped, g_fuel, g_wall, g_result)
        ON CONFLICT (batch) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'reservation batch % was given up by its node', p_batch
            USING ERRCODE = '40001';
    END IF;
END
$$;

-- Give batch `p_batch` up: fence it off if it has not landed; if it has, release what it
-- granted (once). The number of reservations released.
CREATE FUNCTION vak_reserve_give_up(p_batch text, p_node text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    f vak_reserve_fence%ROWTYPE;
    k integer;
BEGIN
    INSERT INTO vak_reserve_fence (batch, node, landed) VALUES (p_batch, p_node, false)
        ON CONFLICT (batch) DO NOTHING;
    IF FOUND THEN
        RETURN 0;
    END IF;
    UPDATE vak_reserve_fence SET released = true
        WHERE batch = p_batch AND landed AND NOT released RETURNING * INTO f;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR k IN 1 .. coalesce(array_length(f.sessions, 1), 0) LOOP
        UPDATE vak_ledgers SET calls_reserved = vak_clamp(calls_reserved::numeric - 1),
            fuel_reserved = vak_clamp(fuel_reserved::numeric - f.fuel[k]),
            wall_ms_reserved = vak_clamp(wall_ms_reserved::numeric - f.wall[k]),
            result_bytes_reserved = vak_clamp(result_bytes_reserved::numeric - f.result_bytes[k]),
            updated_at = now()
        WHERE session_id = f.sessions[k];
        IF f.tool_capped[k] THEN
            UPDATE vak_ledger_tools SET calls = GREATEST(calls - 1, 0)
                WHERE session_id = f.sessions[k] AND tool = f.tools[k];
        END IF;
    END LOOP;
    RETURN coalesce(array_length(f.sessions, 1), 0);
END
$$;
