-- vak's shared store, version 5: spent markers. What a node hands out to be taken back once (an
-- MCP `requestState`) is marked spent here by the node that takes it back: the insert of a key
-- that is there already does nothing, so of two nodes taking the same state one wins. A marker
-- outlives what it stands for and is dropped once expired.
CREATE TABLE vak_spent_states (
    key text PRIMARY KEY,
    expires_at timestamptz NOT NULL,
    spent_by text NOT NULL,
    spent_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX vak_spent_states_expiry ON vak_spent_states (expires_at);
