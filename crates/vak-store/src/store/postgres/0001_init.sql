-- vak's shared store, version 1: the journal, the revocations, the session ledgers and the nodes.
-- Applied by `vak store migrate` (and at a node's start when needed), once, in a transaction.

-- bigint of a numeric, held to [0, max]: figures never wrap, whatever a policy allows.
CREATE FUNCTION vak_clamp(v numeric) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT
    AS $$ SELECT GREATEST(LEAST(v, 9223372036854775807), 0)::bigint $$;

-- The journal: one hash chain per node (node, node_seq, prev_hash, hash); gseq is the order in
-- which entries were committed across every node.
CREATE TABLE vak_records (
    gseq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    node          text   NOT NULL,
    node_seq      bigint NOT NULL,
    call_id       text   NOT NULL,
    tool          text   NOT NULL,
    status        text   NOT NULL,
    stage         text   NOT NULL,
    principal     text,
    session_id    text   NOT NULL,
    received_at   text   NOT NULL,
    record        text   NOT NULL,
    prev_hash     text   NOT NULL,
    hash          text   NOT NULL,
    committed_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT vak_records_node_node_seq_key UNIQUE (node, node_seq)
);
CREATE INDEX vak_records_call ON vak_records (call_id);

-- Revocations, as the local file's lines (JSON); inserting one notifies every node.
CREATE TABLE vak_revocations (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry        text NOT NULL,
    recorded_by  text NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);

-- Session ledgers: what each session used and holds reserved, charged by every node.
CREATE TABLE vak_ledgers (
    session_id             text PRIMARY KEY,
    principal              text,
    calls_used             bigint NOT NULL DEFAULT 0,
    calls_reserved         bigint NOT NULL DEFAULT 0,
    fuel_used              bigint NOT NULL DEFAULT 0,
    fuel_reserved          bigint NOT NULL DEFAULT 0,
    wall_ms_used           bigint NOT NULL DEFAULT 0,
    wall_ms_reserved       bigint NOT NULL DEFAULT 0,
    result_bytes_used      bigint NOT NULL DEFAULT 0,
    result_bytes_reserved  bigint NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

-- Calls per tool and session (reserved ones included), for a policy's calls_per_session.
CREATE TABLE vak_ledger_tools (
    session_id  text   NOT NULL,
    tool        text   NOT NULL,
    calls       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (session_id, tool)
);

-- The nodes that have served from this store: what they serve and with which key.
CREATE TABLE vak_nodes (
    node           text PRIMARY KEY,
    started_at     timestamptz NOT NULL,
    policy_sha256  text,
    public_key     text,
    vak_version    text NOT NULL
);

-- Admit one call against its session's caps and reserve its limits, atomically: the session's
-- row is locked for the rest of the statement, so concurrent calls on any node are admitted one
-- after another on the database's own figures. The same steps as `budget::admit_claim`, in the
-- same order; a refusal says which cap and its figures, an admission the limits granted.
CREATE FUNCTION vak_reserve(
    p_session text, p_principal text, p_tool text,
    p_calls_cap bigint, p_fuel_cap bigint, p_wall_cap bigint, p_result_cap bigint,
    p_tool_cap bigint,
    p_fuel bigint, p_wall bigint, p_result bigint)
RETURNS TABLE (refusal text, resource text, lim bigint, used bigint, reserved bigint,
               fuel bigint, wall bigint, result_bytes bigint)
LANGUAGE plpgsql AS $$
DECLARE
    l vak_ledgers%ROWTYPE;
    t bigint := 0;
    remaining numeric;
BEGIN
    INSERT INTO vak_ledgers (session_id, principal) VALUES (p_session, p_principal)
        ON CONFLICT (session_id) DO NOTHING;
    SELECT * INTO l FROM vak_ledgers WHERE session_id = p_session FOR UPDATE;
    IF l.principal IS DISTINCT FROM p_principal THEN
        RETURN QUERY SELECT 'session_principal'::text, NULL::text, NULL::bigint, NULL::bigint,
            NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF p_calls_cap IS NOT NULL AND l.calls_used + l.calls_reserved >= p_calls_cap THEN
        RETURN QUERY SELECT 'session_calls'::text, NULL::text, p_calls_cap,
            l.calls_used + l.calls_reserved, NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint;
        RETURN;
    END IF;
    IF p_tool_cap IS NOT NULL THEN
        INSERT INTO vak_ledger_tools (session_id, tool) VALUES (p_session, p_tool)
            ON CONFLICT (session_id, tool) DO NOTHING;
        SELECT calls INTO t FROM vak_ledger_tools
            WHERE session_id = p_session AND tool = p_tool FOR UPDATE;
        IF t >= p_tool_cap THEN
            RETURN QUERY SELECT 'tool_calls'::text, NULL::text, p_tool_cap, t, NULL::bigint,
                NULL::bigint, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    IF p_fuel_cap IS NOT NULL THEN
        remaining := p_fuel_cap::numeric - (l.fuel_used::numeric + l.fuel_reserved);
        IF remaining <= 0 THEN
            RETURN QUERY SELECT 'session_exhausted'::text, 'fuel'::text, p_fuel_cap, l.fuel_used,
                l.fuel_reserved, NULL::bigint, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        p_fuel := LEAST(p_fuel::numeric, remaining)::bigint;
    END IF;
    IF p_wall_cap IS NOT NULL THEN
        remaining := p_wall_cap::numeric - (l.wall_ms_used::numeric + l.wall_ms_reserved);
        IF remaining <= 0 THEN
            RETURN QUERY SELECT 'session_exhausted'::text, 'wall_time_ms'::text, p_wall_cap,
                l.wall_ms_used, l.wall_ms_reserved, NULL::bigint, NULL::bigint, NULL::bigint;
            RETURN;
        END IF;
        p_wall := LEAST(p_wall::numeric, remaining)::bigint;
    END IF;
    IF p_result_cap IS NOT NULL THEN
        remaining := p_result_cap::numeric
            - (l.result_bytes_used::numeric + l.result_bytes_reserved);
        IF remaining <= 0 THEN
            RETURN QUERY SELECT 'session_exhausted'::text, 'result_bytes'::text, p_result_cap,
                l.result_bytes_used, l.result_bytes_reserved, NULL::bigint, NULL::bigint,
                NULL::bigint;
            RETURN;
        END IF;
        p_result := LEAST(p_result::numeric, remaining)::bigint;
    END IF;
    UPDATE vak_ledgers SET
        calls_reserved = calls_reserved + 1,
        fuel_reserved = vak_clamp(fuel_reserved::numeric + p_fuel),
        wall_ms_reserved = vak_clamp(wall_ms_reserved::numeric + p_wall),
        result_bytes_reserved = vak_clamp(result_bytes_reserved::numeric + p_result),
        updated_at = now()
    WHERE session_id = p_session;
    IF p_tool_cap IS NOT NULL THEN
        UPDATE vak_ledger_tools SET calls = calls + 1
            WHERE session_id = p_session AND tool = p_tool;
    END IF;
    RETURN QUERY SELECT NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::bigint,
        p_fuel, p_wall, p_result;
END
$$;
