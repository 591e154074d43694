//! `research`: fetch allow-listed pages and report what each says about itself (its title), each
//! finding cited to the host receipt of the fetch, with the digest of the body it was read from.
//! The claim is the title's text as it occurs in the page, and the cited item backs the whole
//! finding (claim, URL and digest), which the host compares with the body it fetched.

use vak_guest::prelude::*;

/// Arguments of `research`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The pages to read (1 to 5), from the origins the policy allows.
    pub urls: Vec<String>,
}

#[derive(Serialize)]
pub struct Source {
    pub url: String,
    pub sha256: String,
}

#[derive(Serialize)]
pub struct Finding {
    pub claim: String,
    pub sources: Vec<Source>,
    /// Ids of the evidence items that support the claim.
    pub evidence: Vec<String>,
}

/// The `vak.research.findings/1` payload.
#[derive(Serialize)]
pub struct Findings {
    pub findings: Vec<Finding>,
}

fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title>")?;
    let t = html[open_end..close]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!t.is_empty()).then_some(t)
}

pub struct Research;

impl Tool for Research {
    type Args = Args;
    const NAME: &'static str = "research";
    const DESCRIPTION: &'static str =
        "Fetch allow-listed pages and report each page's title, cited to the fetch that read it.";

    fn claims() -> Claims {
        Claims::new().http(Vec::<String>::new())
    }

    fn payload_schemas() -> Vec<String> {
        vec!["vak.research.findings/1".to_string()]
    }

    fn call(args: Args) -> Result<Output, ToolError> {
        if args.urls.is_empty() || args.urls.len() > 5 {
            return Err(ToolError::new("urls", "give between 1 and 5 URLs"));
        }
        let mut findings = Vec::new();
        let mut evidence = Vec::new();
        let mut markdown = String::from("## Findings\n\n");
        for (i, url) in args.urls.iter().enumerate() {
            let page =
                http::get(url).map_err(|e| ToolError::new("fetch", format!("{url}: {e}")))?;
            if !(200..300).contains(&page.status) {
                return Err(ToolError::new(
                    "fetch",
                    format!("{url} answered {}", page.status),
                ));
            }
            let text = String::from_utf8_lossy(&page.body);
            let id = format!("source-{i}");
            // The claim is the page's own words (its title), so the host can find it in the
            // body it fetched; the sentence around it in the document is presentation.
            let claim = match title(&text) {
                Some(t) => {
                    markdown.push_str(&format!(
                        "- {} is titled \"{t}\" [{}]\n",
                        page.final_url,
                        i + 1
                    ));
                    evidence.push(
                        Evidence::cited(&id, &page.receipt)
                            .digest(&page.sha256)
                            .supports(&format!("/findings/{i}"))
                            .note(&page.final_url),
                    );
                    t
                }
                None => {
                    // That a page has no title is the tool's reading, not words of the page:
                    // only the source is cited, the claim is the tool's own.
                    let claim = format!("{} has no title", page.final_url);
                    markdown.push_str(&format!("- {claim} [{}]\n", i + 1));
                    evidence.push(
                        Evidence::cited(&id, &page.receipt)
                            .digest(&page.sha256)
                            .supports(&format!("/findings/{i}/sources/0"))
                            .note(&page.final_url),
                    );
                    evidence.push(
                        Evidence::synthesized(&format!("reading-{i}"))
                            .supports(&format!("/findings/{i}/claim"))
                            .note("no <title> found"),
                    );
                    claim
                }
            };
            findings.push(Finding {
                claim,
                sources: vec![Source {
                    url: page.final_url.clone(),
                    sha256: page.sha256.clone(),
                }],
                evidence: vec![id],
            });
        }
        let mut out = Output::markdown(markdown)
            .with_payload("vak.research.findings/1", &Findings { findings })?;
        for e in evidence {
            out = out.with_evidence(e);
        }
        Ok(out)
    }
}

vak_guest::export_tool!(Research);
