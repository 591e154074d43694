//! Takes an argument of every kind a Rust tool's type gives (integers of several widths, an
//! optional field of each type, a unit enum, an enum with data, an array of objects through
//! `$defs`) and answers with what it read: the tests check that provider declarations and the
//! schema stage agree on these shapes, and that the tool reads what the schema stage passed
//! (`3.0` for an integer, as Gemini writes it).

use vak_guest::prelude::*;

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// How many times to repeat the word.
    pub times: u32,
    /// The word to repeat.
    pub word: String,
    /// Upper-case the word.
    #[serde(default)]
    pub upper: bool,
    /// A note to add.
    #[serde(default)]
    pub note: Option<String>,
    /// A shape.
    #[serde(default)]
    pub shape: Option<Shape>,
    /// Points.
    #[serde(default)]
    pub points: Vec<Point>,
    /// A level.
    #[serde(default)]
    pub level: Option<Level>,
    /// A small number.
    #[serde(default)]
    pub small: Option<u8>,
    /// A ratio.
    #[serde(default)]
    pub ratio: Option<f64>,
    /// An offset.
    #[serde(default)]
    pub offset: Option<i64>,
}

/// An enum with data (externally tagged: `{"Circle": {"radius": 1.5}}`, or `"Dot"`).
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub enum Shape {
    Dot,
    Circle { radius: f64 },
    Square { side: u16 },
}

/// A point in the plane.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Point {
    pub x: i32,
    pub y: i32,
}

/// A unit enum.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Low,
    High,
}

pub struct Shapes;

impl Tool for Shapes {
    type Args = Args;
    const NAME: &'static str = "shapes";
    const DESCRIPTION: &'static str = "Repeats a word and says what arguments it read.";

    fn call(args: Args) -> Result<Output, ToolError> {
        let word = if args.upper {
            args.word.to_uppercase()
        } else {
            args.word.clone()
        };
        let repeated = vec![word; args.times.min(100) as usize].join(" ");
        let read = vak_guest::serde_json::to_string(&args)
            .map_err(|e| ToolError::new("serialize", e.to_string()))?;
        Ok(Output::markdown(format!("{repeated}\n\nread: {read}")))
    }
}

vak_guest::export_tool!(Shapes);
