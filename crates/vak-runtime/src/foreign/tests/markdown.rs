//! The Markdown of a result: lossless, and no content can leave its code block.

use crate::foreign::markdown;
use serde_json::{Value, json};

/// The opening fence, and the content as a CommonMark reader gets it back: the lines between
/// the opening fence and the first line that closes it, without the final line ending.
fn read_back(md: &str) -> (String, String) {
    let (open, rest) = md.split_once('\n').expect("an opening fence line");
    let fence: String = open.chars().take_while(|c| *c == '`').collect();
    assert!(fence.len() >= 3, "{md}");
    let mut content = Vec::new();
    let mut closed = false;
    for line in rest.split('\n') {
        let trimmed = line.trim_start_matches(' ');
        if line.len() - trimmed.len() <= 3
            && trimmed.starts_with(&fence)
            && trimmed.trim_end().chars().all(|c| c == '`')
        {
            closed = true;
            break;
        }
        content.push(line);
    }
    assert!(closed, "the block is closed: {md}");
    (open.to_string(), content.join("\n"))
}

#[test]
fn a_string_is_its_own_text_in_a_fence_nothing_closes() {
    for text in [
        "",
        "hello",
        "two\nlines\n",
        "```\nnot a fence end\n```",
        "````` five and ``` three",
        "<script>alert(1)</script> **bold** [link](x)",
        "   ```",
        "\t indented\n\n\n",
    ] {
        let md = markdown(&json!(text));
        let (open, content) = read_back(&md);
        assert_eq!(open.trim_start_matches('`'), "", "no info string: {md}");
        assert_eq!(content, text, "{md}");
        assert!(md.ends_with(&open), "closed by the same fence: {md}");
    }
    assert_eq!(markdown(&json!("hello")), "```\nhello\n```");
}

#[test]
fn a_string_markdown_would_alter_is_shown_as_json() {
    for text in ["carriage\r\nreturn", "nul\0byte"] {
        let md = markdown(&json!(text));
        let (open, content) = read_back(&md);
        assert!(open.ends_with("json"), "{md}");
        assert_eq!(
            serde_json::from_str::<Value>(&content).ok(),
            Some(json!(text))
        );
    }
}

#[test]
fn any_other_value_is_pretty_json_that_reads_back() {
    let values = [
        json!({"a": 1, "b": [true, null, "x"]}),
        json!(3),
        json!(null),
        json!({"tag": "circle", "val": 1.5}),
        json!({"text": "a ```` run of backticks"}),
    ];
    for value in values {
        let md = markdown(&value);
        let (open, content) = read_back(&md);
        assert!(open.ends_with("json"), "{md}");
        assert_eq!(
            serde_json::from_str::<Value>(&content).ok(),
            Some(value.clone())
        );
    }
    assert_eq!(markdown(&json!({"a": 1})), "```json\n{\n  \"a\": 1\n}\n```");
}

#[test]
fn a_deep_value_is_written_compact() {
    let mut value = json!(1);
    for _ in 0..100 {
        value = json!([value]);
    }
    let md = markdown(&value);
    let (_, content) = read_back(&md);
    assert_eq!(
        content,
        value.to_string(),
        "compact, not indented 100 levels"
    );
    assert_eq!(serde_json::from_str::<Value>(&content).ok(), Some(value));
}
