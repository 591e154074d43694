//! What a component asks of the compiler, measured before Cranelift sees it.
//!
//! Cranelift's time and memory grow with the size and shape of each function (a body of
//! megabytes, tens of thousands of live locals, blocks nested a hundred thousand deep), and a
//! compile cannot be interrupted once it started. So admission reads every core module of a
//! component first, in one linear pass over its bytes, and refuses one whose functions exceed
//! [`CodeLimits`]; the limits were chosen from the real components vak runs (see SECURITY.md,
//! "Compile bounds", for the figures and the margins).

use serde::Serialize;
use wasmparser::{Operator, Parser, Payload};

/// The shape of the code in a component: the largest of each measure over all its core modules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CodeFigures {
    /// Core modules, nested ones included.
    pub modules: u32,
    /// Function bodies in all modules.
    pub functions: u64,
    /// Bytes of function bodies in all modules.
    pub code_bytes: u64,
    /// The largest function body, in bytes.
    pub max_body_bytes: u64,
    /// The most locals one function declares (parameters not counted).
    pub max_locals: u64,
    /// The deepest nesting of `block`, `loop`, `if` and `try_table` in one function.
    pub max_nesting: u64,
}

/// The most a component may ask of the compiler: past any of these it is refused before its
/// compile starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CodeLimits {
    /// Largest function body, in bytes.
    pub max_body_bytes: u64,
    /// Most locals one function may declare.
    pub max_locals: u64,
    /// Deepest control nesting in one function.
    pub max_nesting: u64,
    /// Most bytes of function bodies in one component.
    pub max_code_bytes: u64,
    /// Most function bodies in one component.
    pub max_functions: u64,
}

impl Default for CodeLimits {
    /// The limits vak admits under. The largest of each measured over the components vak runs
    /// (the bundled tools, the test guests, `tools/py-clock` and `tools/js-clock`, and the
    /// Wassette examples of `byo/`), and the margin left (SECURITY.md, "Compile bounds"):
    /// body 426,843 bytes (CPython's interpreter loop, componentize-py) → 1 MiB, 2.4×;
    /// locals 271 (componentize-py) → 2,048, 7.5×; nesting 781 (componentize-py) → 4,096, 5.2×;
    /// code 9.2 MB (StarlingMonkey, jco) → 64 MiB, 7×; functions 13,482 (componentize-py)
    /// → 100,000, 7.4×.
    fn default() -> Self {
        CodeLimits {
            max_body_bytes: 1 << 20,
            max_locals: 2_048,
            max_nesting: 4_096,
            max_code_bytes: 64 << 20,
            max_functions: 100_000,
        }
    }
}

/// Which bound a component's code exceeds, with both figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CodeRefusal {
    #[error("a function body is {actual} bytes; at most {limit} are compiled")]
    BodyTooLarge { actual: u64, limit: u64 },
    #[error("a function declares {actual} locals; at most {limit} are compiled")]
    TooManyLocals { actual: u64, limit: u64 },
    #[error("a function nests blocks {actual} deep; at most {limit} are compiled")]
    NestedTooDeep { actual: u64, limit: u64 },
    #[error("the component holds {actual} bytes of code; at most {limit} are compiled")]
    TooMuchCode { actual: u64, limit: u64 },
    #[error("the component holds {actual} functions; at most {limit} are compiled")]
    TooManyFunctions { actual: u64, limit: u64 },
}

/// Why the code of a component could not be measured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodeError {
    #[error("not a well-formed WebAssembly binary: {0}")]
    Malformed(String),
    #[error(transparent)]
    Refused(#[from] CodeRefusal),
}

impl CodeLimits {
    /// The first bound `figures` exceed, if any.
    pub fn check(&self, f: &CodeFigures) -> Result<(), CodeRefusal> {
        let over = |actual: u64, limit: u64| actual > limit;
        if over(f.max_body_bytes, self.max_body_bytes) {
            return Err(CodeRefusal::BodyTooLarge {
                actual: f.max_body_bytes,
                limit: self.max_body_bytes,
            });
        }
        if over(f.max_locals, self.max_locals) {
            return Err(CodeRefusal::TooManyLocals {
                actual: f.max_locals,
                limit: self.max_locals,
            });
        }
        if over(f.max_nesting, self.max_nesting) {
            return Err(CodeRefusal::NestedTooDeep {
                actual: f.max_nesting,
                limit: self.max_nesting,
            });
        }
        if over(f.code_bytes, self.max_code_bytes) {
            return Err(CodeRefusal::TooMuchCode {
                actual: f.code_bytes,
                limit: self.max_code_bytes,
            });
        }
        if over(f.functions, self.max_functions) {
            return Err(CodeRefusal::TooManyFunctions {
                actual: f.functions,
                limit: self.max_functions,
            });
        }
        Ok(())
    }
}

/// Measure every function of every core module in `bytes` (a component or a module), stopping
/// at the first function past `limits`: one pass, linear in the size of `bytes`.
pub fn measure(bytes: &[u8], limits: &CodeLimits) -> Result<CodeFigures, CodeError> {
    let malformed = |e: wasmparser::BinaryReaderError| CodeError::Malformed(e.message().into());
    let mut f = CodeFigures::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload.map_err(malformed)? {
            Payload::ModuleSection { .. } => f.modules += 1,
            Payload::Version {
                encoding: wasmparser::Encoding::Module,
                ..
            } if f.modules == 0 => f.modules = 1,
            Payload::CodeSectionEntry(body) => {
                let size = body.range().len() as u64;
                f.functions += 1;
                f.code_bytes += size;
                f.max_body_bytes = f.max_body_bytes.max(size);
                let mut locals = 0u64;
                for group in body.get_locals_reader().map_err(malformed)? {
                    let (count, _) = group.map_err(malformed)?;
                    locals = locals.saturating_add(u64::from(count));
                }
                f.max_locals = f.max_locals.max(locals);
                // Checked before the operators are read: past a bound, reading further is waste.
                limits.check(&f)?;
                f.max_nesting = f.max_nesting.max(nesting(&body).map_err(malformed)?);
                limits.check(&f)?;
            }
            _ => {}
        }
    }
    Ok(f)
}

/// The deepest control nesting in one function body.
fn nesting(body: &wasmparser::FunctionBody<'_>) -> wasmparser::Result<u64> {
    let mut reader = body.get_operators_reader()?;
    let (mut depth, mut max) = (0u64, 0u64);
    while !reader.eof() {
        match reader.read()? {
            Operator::Block { .. }
            | Operator::Loop { .. }
            | Operator::If { .. }
            | Operator::TryTable { .. }
            | Operator::Try { .. } => {
                depth += 1;
                max = max.max(depth);
            }
            Operator::End => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module of one function: `locals` i64 locals, `nest` nested blocks, `filler` `nop`s.
    fn module(locals: u32, nest: u32, filler: usize) -> Vec<u8> {
        let mut body = Vec::new();
        // one local group
        body.push(1u8);
        leb(&mut body, locals);
        body.push(0x7e);
        for _ in 0..nest {
            body.extend([0x02, 0x40]);
        }
        body.extend(std::iter::repeat_n(0x01, filler));
        body.extend(std::iter::repeat_n(0x0b, nest as usize + 1));
        let mut code = Vec::new();
        code.push(1u8);
        leb(&mut code, body.len() as u32);
        code.extend(body);
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend([1, 4, 1, 0x60, 0, 0]); // type section: () -> ()
        m.extend([3, 2, 1, 0]); // function section
        m.push(10);
        leb(&mut m, code.len() as u32);
        m.extend(code);
        m
    }

    fn leb(out: &mut Vec<u8>, mut v: u32) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn each_bound_refuses_only_past_it() {
        let limits = CodeLimits {
            max_body_bytes: 1000,
            max_locals: 100,
            max_nesting: 10,
            max_code_bytes: 10_000,
            max_functions: 10,
        };
        let f = measure(&module(100, 10, 10), &limits).unwrap();
        assert_eq!(
            (f.modules, f.functions, f.max_locals, f.max_nesting),
            (1, 1, 100, 10)
        );
        assert!(matches!(
            measure(&module(101, 1, 0), &limits),
            Err(CodeError::Refused(CodeRefusal::TooManyLocals {
                actual: 101,
                limit: 100
            }))
        ));
        assert!(matches!(
            measure(&module(1, 11, 0), &limits),
            Err(CodeError::Refused(CodeRefusal::NestedTooDeep {
                actual: 11,
                limit: 10
            }))
        ));
        assert!(matches!(
            measure(&module(1, 1, 2000), &limits),
            Err(CodeError::Refused(CodeRefusal::BodyTooLarge {
                limit: 1000,
                ..
            }))
        ));
        assert!(matches!(
            measure(b"\0asm\x01\0\0\0\x0a\xff", &limits),
            Err(CodeError::Malformed(_))
        ));
    }
}
