//! The summary of a scale run: which configurations failed, and the table printed.

use super::*;

impl Summary {
    /// Whether a configuration failed: a call that was not ok, a node or SQL problem, or a
    /// PostgreSQL cluster that did not start.
    pub fn failed(&self) -> bool {
        matches!(self.postgres, PgState::Failed(_)) || self.rows.iter().any(Row::failed)
    }

    /// The baseline's calls per second (configuration 1), when it ran.
    pub(crate) fn baseline(&self) -> Option<f64> {
        self.rows
            .first()
            .and_then(|r| r.report.as_ref())
            .map(Report::rate)
            .filter(|&rate| rate > 0.0)
    }

    pub fn to_json(&self) -> Value {
        let baseline = self.baseline();
        let configurations: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let mut v = json!({
                    "name": row.config.name,
                    "nodes": row.config.nodes,
                    "store": if row.config.postgres { "postgres" } else { "sqlite" },
                    "session": row.config.capped.then_some(SESSION),
                    "start_s": row.start.map(|d| d.as_secs_f64()),
                    "wall_s": row.wall.as_secs_f64(),
                    "failed": row.failed(),
                    "problems": row.problems,
                    "notes": row.notes,
                });
                if let Some(r) = &row.report {
                    let [p50, p90, p99, max] = r.latency();
                    v["calls_per_second"] = json!(r.rate());
                    v["vs_baseline"] = json!(baseline.map(|b| r.rate() / b));
                    v["calls"] = json!(r.calls());
                    v["ok"] = json!(r.ok());
                    v["errors"] = json!(r.calls() - r.ok());
                    v["p50_us"] = json!(p50);
                    v["p90_us"] = json!(p90);
                    v["p99_us"] = json!(p99);
                    v["max_us"] = json!(max);
                    v["elapsed_s"] = json!(r.elapsed().as_secs_f64());
                    let mut load = r.to_json();
                    if let Some(load) = load.as_object_mut() {
                        load.remove("mode");
                    }
                    v["load"] = load;
                    if let Some(db) = &row.db {
                        v["database"] = db.to_json(r.calls());
                    }
                }
                v
            })
            .collect();
        let (postgres, skipped) = match &self.postgres {
            PgState::Ran(version) => (json!({"version": version}), Value::Null),
            PgState::Unavailable(why) => (Value::Null, json!(why)),
            PgState::Failed(e) => (json!({"error": e}), json!(e)),
        };
        json!({
            "mode": "scale",
            "vak": self.vak.display().to_string(),
            "tool": self.tool,
            "calls": self.calls,
            "warmup": self.warmup,
            "inflight": self.inflight,
            "postgres": postgres,
            "postgres_skipped": skipped,
            "failed": self.failed(),
            "configurations": configurations,
        })
    }

    pub fn table(&self) -> String {
        let mut out = format!(
            "vak-mcp-load scale: {}, tool {}, {} calls per configuration after {} warmup, {} \
             connections\n",
            self.vak.display(),
            self.tool,
            self.calls,
            self.warmup,
            self.inflight
        );
        match &self.postgres {
            PgState::Ran(version) => out.push_str(&format!(
                "PostgreSQL {version}: a throwaway cluster with pg_stat_statements, a fresh \
                 database per configuration\n"
            )),
            PgState::Unavailable(why) => out.push_str(&format!(
                "PostgreSQL configurations SKIPPED: PostgreSQL is not available here: {why}\n"
            )),
            PgState::Failed(e) => out.push_str(&format!(
                "PostgreSQL configurations NOT RUN: the cluster did not start: {e}\n"
            )),
        }
        out.push('\n');
        let baseline = self.baseline();
        let header = [
            "configuration",
            "nodes",
            "calls/s",
            "× base",
            "p50 µs",
            "p99 µs",
            "ok",
            "errors",
            "start s",
            "wall s",
            "reserve/call",
            "commits/call",
            "records/commit",
            "revoc. reads",
            "other/call",
        ];
        let mut cells: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        for row in &self.rows {
            let mut line = vec![
                row.config.name.to_owned(),
                row.config.nodes.len().to_string(),
            ];
            let dash = || "-".to_owned();
            match &row.report {
                Some(r) => {
                    let [p50, _, p99, _] = r.latency();
                    line.push(format!("{:.0}", r.rate()));
                    line.push(baseline.map_or_else(dash, |b| format!("{:.2}", r.rate() / b)));
                    line.push(format!("{p50:.0}"));
                    line.push(format!("{p99:.0}"));
                    line.push(r.ok().to_string());
                    line.push((r.calls() - r.ok()).to_string());
                }
                None => line.extend(std::iter::repeat_with(dash).take(6)),
            }
            line.push(
                row.start
                    .map_or_else(dash, |d| format!("{:.1}", d.as_secs_f64())),
            );
            line.push(format!("{:.1}", row.wall.as_secs_f64()));
            match (&row.db, &row.report) {
                (Some(db), Some(r)) => {
                    let p = db.per_call(r.calls());
                    line.push(format!("{:.3}", p.reservations));
                    line.push(format!("{:.3}", p.commits));
                    line.push(
                        p.records_per_commit
                            .map_or_else(dash, |x| format!("{x:.1}")),
                    );
                    line.push(p.revocation_reads.to_string());
                    line.push(format!("{:.3}", p.other));
                }
                _ => line.extend(std::iter::repeat_with(dash).take(5)),
            }
            cells.push(line);
        }
        out.push_str(&render(&cells));
        out.push_str(
            "\nDatabase statements are those of the measured phase (pg_stat_statements): \
             reserve = vak_reserve, commits = journal group commits (INSERT INTO vak_records), \
             records/commit = calls ÷ commits, revoc. reads = polls of vak_revocations in all, \
             other = any other statement. start s = until every node was ready; wall s = the \
             whole configuration.\n",
        );
        for row in &self.rows {
            let mut lines = Vec::new();
            if let Some(r) = &row.report
                && r.ok() != r.calls()
            {
                lines.push(format!(
                    "{} of {} calls failed:",
                    r.calls() - r.ok(),
                    r.calls()
                ));
                lines.extend(r.error_lines().into_iter().map(|l| format!("  {l}")));
            }
            lines.extend(row.problems.iter().map(|p| format!("error: {p}")));
            lines.extend(row.notes.iter().map(|n| format!("note: {n}")));
            if let Some(db) = &row.db {
                for (query, calls) in db.other.iter().take(3) {
                    lines.push(format!("other statement, {calls}×: {query}"));
                }
            }
            if !lines.is_empty() {
                out.push_str(&format!("\n{}:\n", row.config.name));
                for line in lines {
                    out.push_str(&format!("  {line}\n"));
                }
            }
        }
        out
    }
}

/// Columns padded to their widest cell: the first left-aligned, the others right-aligned.
pub(crate) fn render(cells: &[Vec<String>]) -> String {
    let columns = cells.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            (cells.iter())
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c == 0 {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str("  ");
                line.push_str(&pad);
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
