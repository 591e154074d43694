//! Spent markers in the shared store: what one node marks spent, every node finds spent.

use super::PgStore;
use crate::store::StoreError;
use std::time::Duration;

impl PgStore {
    /// Mark `key` spent for `keep` from now (the database's clock): `true` when this call spent
    /// it, `false` when some node had. Markers expired by now are dropped.
    pub async fn spend(&self, key: &str, keep: Duration) -> Result<bool, StoreError> {
        let (key, node) = (key.to_string(), self.options.node.clone());
        let seconds = keep.as_secs_f64();
        self.db
            .with("spent state", async move |c| {
                let spent = c
                    .query_opt(
                        "INSERT INTO vak_spent_states (key, expires_at, spent_by)
                         VALUES ($1, now() + make_interval(secs => $2), $3)
                         ON CONFLICT DO NOTHING RETURNING key",
                        &[&key, &seconds, &node],
                    )
                    .await?
                    .is_some();
                c.execute("DELETE FROM vak_spent_states WHERE expires_at < now()", &[])
                    .await?;
                Ok(spent)
            })
            .await
    }
}
