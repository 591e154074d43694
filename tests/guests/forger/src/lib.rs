//! Crafts a result over real receipts of its own call: it carries out the effects its spec lists
//! (clock readings, fetches, reads, writes), then returns the payload and evidence items of the
//! spec with placeholders filled from what those effects returned. The evidence corpus
//! (`tests/data/evidence/`) uses it to present honest results and fabricated ones alike.
//!
//! A placeholder is a JSON string `"$N.field"`: field `field` of effect `N`'s return
//! (`receipt`, and `instant`, `unix_seconds`, `nanos`, `offset_seconds`, `zone` for a reading;
//! `final_url`, `sha256`, `status`, `body` for a fetch; `sha256`, `content` for a read;
//! `sha256` for a write). `"$N.instant@+3600[Europe/Paris]"` is the reading's moment written
//! at that offset, with that annotation.

use vak_guest::prelude::*;
use vak_guest::serde_json::{Map, Value};

#[derive(Deserialize, JsonSchema)]
pub struct Args {
    /// The spec, as JSON text: `effects` (`clock:ZONE`, `fetch:URL`, `read:ROOT:PATH`,
    /// `write:ROOT:PATH:CONTENT`), `schema`, `payload`, `evidence`, `markdown`.
    pub spec: String,
}

pub struct Forger;

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::new("forger", e.to_string())
}

/// The days since 1970-01-01 as a civil date (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// RFC 3339 text of `seconds`+`nanos` at `offset` seconds east of UTC.
fn rfc3339(seconds: i64, nanos: u32, offset: i64, annotation: &str) -> String {
    let local = seconds + offset;
    let (y, mo, d) = civil(local.div_euclid(86_400));
    let s = local.rem_euclid(86_400);
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    let sign = if offset < 0 { '-' } else { '+' };
    let o = offset.abs();
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}{frac}{sign}{:02}:{:02}{annotation}",
        s / 3600,
        s % 3600 / 60,
        s % 60,
        o / 3600,
        o % 3600 / 60
    )
}

fn fill(v: &Value, effects: &[Map<String, Value>]) -> Result<Value, ToolError> {
    Ok(match v {
        Value::String(s) if s.starts_with('$') => {
            let (n, field) = s[1..]
                .split_once('.')
                .ok_or_else(|| fail(format!("bad placeholder {s}")))?;
            let e = n
                .parse::<usize>()
                .ok()
                .and_then(|n| effects.get(n))
                .ok_or_else(|| fail(format!("no effect {n}")))?;
            if let Some((name, shifted)) = field.split_once('@') {
                if name != "instant" {
                    return Err(fail(format!("only an instant can be shifted: {s}")));
                }
                let (offset, annotation) = match shifted.find('[') {
                    Some(i) => (&shifted[..i], &shifted[i..]),
                    None => (shifted, ""),
                };
                let offset: i64 = offset.parse().map_err(fail)?;
                let seconds = e["unix_seconds"].as_i64().unwrap_or(0);
                let nanos = e["nanos"].as_u64().unwrap_or(0) as u32;
                Value::String(rfc3339(seconds, nanos, offset, annotation))
            } else {
                e.get(field)
                    .cloned()
                    .ok_or_else(|| fail(format!("effect {n} has no {field}")))?
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| fill(i, effects))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(k.clone(), fill(v, effects)?);
            }
            Value::Object(out)
        }
        other => other.clone(),
    })
}

fn effect(spec: &str) -> Result<Map<String, Value>, ToolError> {
    let mut out = Map::new();
    let (what, rest) = spec.split_once(':').unwrap_or((spec, ""));
    match what {
        "clock" => {
            let r = clock::now(rest).map_err(fail)?;
            out.insert("instant".into(), json!(r.rfc3339));
            out.insert("unix_seconds".into(), json!(r.unix_seconds));
            out.insert("nanos".into(), json!(r.nanos));
            out.insert("offset_seconds".into(), json!(r.offset_seconds));
            out.insert("zone".into(), json!(r.zone));
            out.insert("receipt".into(), json!(r.receipt));
        }
        "fetch" => {
            let r = http::get(rest).map_err(fail)?;
            out.insert("final_url".into(), json!(r.final_url));
            out.insert("sha256".into(), json!(r.sha256));
            out.insert("status".into(), json!(r.status));
            out.insert(
                "body".into(),
                json!(String::from_utf8_lossy(&r.body).to_string()),
            );
            out.insert("receipt".into(), json!(r.receipt));
        }
        "read" => {
            let (root, path) = rest.split_once(':').ok_or_else(|| fail("read:ROOT:PATH"))?;
            let r = workspace::read(root, path).map_err(fail)?;
            out.insert("sha256".into(), json!(r.sha256));
            out.insert(
                "content".into(),
                json!(String::from_utf8_lossy(&r.content).to_string()),
            );
            out.insert("receipt".into(), json!(r.receipt));
        }
        "write" => {
            let mut parts = rest.splitn(3, ':');
            let (Some(root), Some(path), Some(content)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(fail("write:ROOT:PATH:CONTENT"));
            };
            let r = workspace::write(root, path, content.as_bytes()).map_err(fail)?;
            out.insert("sha256".into(), json!(r.sha256));
            out.insert("receipt".into(), json!(r.receipt));
        }
        other => return Err(fail(format!("no effect {other:?}"))),
    }
    Ok(out)
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

impl Tool for Forger {
    type Args = Args;
    const NAME: &'static str = "forger";
    const DESCRIPTION: &'static str = "Returns the result its spec crafts, over real receipts.";

    fn claims() -> Claims {
        Claims::new()
            .clock(["*"])
            .http(Vec::<String>::new())
            .workspace(["project"])
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        let spec: Value = vak_guest::serde_json::from_str(&args.spec).map_err(fail)?;
        let mut effects = Vec::new();
        for e in strings(&spec["effects"]) {
            effects.push(effect(&e)?);
        }
        let markdown = spec["markdown"].as_str().unwrap_or("crafted").to_string();
        let mut out = Output::markdown(markdown);
        if let Some(schema) = spec["schema"].as_str() {
            out = out.with_payload(schema, &fill(&spec["payload"], &effects)?)?;
        }
        for item in spec["evidence"].as_array().cloned().unwrap_or_default() {
            let item = fill(&item, &effects)?;
            let id = item["id"].as_str().unwrap_or("item");
            let receipt = item["receipt"].as_str().unwrap_or("");
            let mut e = match item["kind"].as_str().unwrap_or("") {
                "observed" => Evidence::observed(id, receipt),
                "cited" => Evidence::cited(id, receipt),
                "computed" => Evidence::computed(id, strings(&item["derived_from"])),
                _ => Evidence::synthesized(id),
            };
            for p in strings(&item["supports"]) {
                e = e.supports(&p);
            }
            if let Some(d) = item["digest"].as_str() {
                e = e.digest(d);
            }
            out = out.with_evidence(e);
        }
        Ok(out)
    }
}

vak_guest::export_tool!(Forger);
