//! Projection: a tool's Markdown and payload rendered for HTML and for a terminal. Nothing the
//! tool wrote becomes markup in the HTML page, and no control character reaches the terminal.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vak_host::outcome::{Label, Outcome};
use vak_host::projection::{RendererCaps, escape, neutralise, project};
use vak_host::record::ToolResultRecord;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let escaped = escape(&text);
    assert!(!escaped.contains(['<', '>', '"', '\'']));
    let result = ToolResultRecord {
        digest: String::new(),
        payload_schema: None,
        payload_json: None,
        markdown: text.clone(),
        evidence: Vec::new(),
        attachments: Vec::new(),
    };
    let outcome = Outcome {
        label: Label::Unverified,
        payload_passed: false,
        requirements: Vec::new(),
    };
    let html = project(&RendererCaps::html(), &result, &outcome, &[]);
    // The page is the host's own markup with the tool's text escaped inside it: no tag the
    // tool wrote survives (the page itself never has a script).
    assert!(!html.rendered.to_ascii_lowercase().contains("<script"));
    let start = html
        .rendered
        .find("<h2>Document</h2><pre>")
        .expect("a document section")
        + 22;
    let end = start + html.rendered[start..].find("</pre>").expect("closed");
    let document = &html.rendered[start..end];
    assert_eq!(
        document,
        escape(&text),
        "the document is the tool's text, escaped"
    );
    assert!(
        !document.contains(['<', '>']),
        "the tool's text reached the page as markup"
    );
    // What the CLI prints for a terminal: no control character and no bidi override survives.
    let terminal = project(&RendererCaps::terminal(), &result, &outcome, &[]);
    let shown = neutralise(&terminal.rendered);
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n' && c != '\t')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
        "a control character reached the terminal: {shown:?}"
    );
});
