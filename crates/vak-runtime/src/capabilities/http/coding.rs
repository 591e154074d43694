//! Content codings (`gzip`, `deflate`, `br`) undone, within a size bound, so that the credential
//! checks of the `http` broker read a body as the guest would once it decoded it.
//!
//! Chunked framing needs nothing here: hyper removes it before the broker sees a body.

use std::io::Read;

/// Most content codings one body may stack (`Content-Encoding: gzip, br` is two).
pub const MAX_CODINGS: usize = 4;

/// A content coding the host can undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    Gzip,
    /// HTTP's `deflate`: a zlib stream (a raw DEFLATE stream, which some servers send, is
    /// accepted too).
    Deflate,
    Brotli,
}

impl Coding {
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Brotli => "br",
        }
    }
}

/// Why a body's coding could not be undone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodingError {
    #[error("is encoded with {0}, which the host cannot decode (it decodes gzip, deflate and br)")]
    Unknown(String),
    #[error("names more than {MAX_CODINGS} content codings")]
    TooMany,
    #[error("does not decode as {coding}: {reason}")]
    Corrupt {
        coding: &'static str,
        reason: String,
    },
    #[error("decodes to more than {limit} bytes")]
    TooLarge { limit: usize },
}

/// The codings `Content-Encoding` values list, in the order they were applied (`identity`
/// left out). A name that is not a short token is not quoted back.
pub fn codings<'a>(values: impl IntoIterator<Item = &'a str>) -> Result<Vec<Coding>, CodingError> {
    let mut out = Vec::new();
    for value in values {
        for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let coding = match name.to_ascii_lowercase().as_str() {
                "identity" => continue,
                "gzip" | "x-gzip" => Coding::Gzip,
                "deflate" => Coding::Deflate,
                "br" => Coding::Brotli,
                _ => {
                    let shown = if name.len() <= 32
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    {
                        format!("`{name}`")
                    } else {
                        "a coding of an unreadable name".to_string()
                    };
                    return Err(CodingError::Unknown(shown));
                }
            };
            out.push(coding);
            if out.len() > MAX_CODINGS {
                return Err(CodingError::TooMany);
            }
        }
    }
    Ok(out)
}

/// `body` with `codings` undone, the last applied first; at most `limit` bytes come out.
pub fn decode(body: &[u8], codings: &[Coding], limit: usize) -> Result<Vec<u8>, CodingError> {
    let mut data = body.to_vec();
    for &coding in codings.iter().rev() {
        data = decode_one(&data, coding, limit)?;
    }
    Ok(data)
}

fn decode_one(body: &[u8], coding: Coding, limit: usize) -> Result<Vec<u8>, CodingError> {
    let read = |reader: &mut dyn Read| -> Result<Vec<u8>, CodingError> {
        let mut out = Vec::new();
        reader
            .take(limit as u64 + 1)
            .read_to_end(&mut out)
            .map_err(|e| CodingError::Corrupt {
                coding: coding.name(),
                reason: e.to_string(),
            })?;
        if out.len() > limit {
            return Err(CodingError::TooLarge { limit });
        }
        Ok(out)
    };
    match coding {
        Coding::Gzip => read(&mut flate2::read::MultiGzDecoder::new(body)),
        Coding::Deflate => read(&mut flate2::read::ZlibDecoder::new(body))
            .or_else(|_| read(&mut flate2::read::DeflateDecoder::new(body))),
        Coding::Brotli => read(&mut brotli_decompressor::Decompressor::new(body, 4096)),
    }
}

/// Whether `body` starts as gzip data does (a body served as a `.gz` file, say, without a
/// `Content-Encoding`).
pub fn looks_gzip(body: &[u8]) -> bool {
    body.starts_with(&[0x1f, 0x8b, 0x08])
}

/// As much of gzip `body` as decodes, at most `limit` bytes: what a guest could get out of it
/// even if it is cut or damaged further on.
pub fn gunzip_what_decodes(body: &[u8], limit: usize) -> Vec<u8> {
    let mut reader = flate2::read::MultiGzDecoder::new(body).take(limit as u64);
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match reader.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn codings_are_undone_in_reverse_within_the_bound() {
        assert_eq!(
            codings(["gzip, identity", "br"]).unwrap(),
            [Coding::Gzip, Coding::Brotli]
        );
        assert!(matches!(codings(["zstd"]), Err(CodingError::Unknown(n)) if n == "`zstd`"));
        assert!(matches!(
            codings(["x\u{1b}[2J"]),
            Err(CodingError::Unknown(n)) if !n.contains('\u{1b}')
        ));
        assert_eq!(
            codings(["gzip,gzip,gzip,gzip,gzip"]),
            Err(CodingError::TooMany)
        );
        let twice = gzip(&gzip(b"hello"));
        assert_eq!(
            decode(&twice, &[Coding::Gzip, Coding::Gzip], 100).unwrap(),
            b"hello"
        );
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(b"zlib").unwrap();
        assert_eq!(
            decode(&z.finish().unwrap(), &[Coding::Deflate], 100).unwrap(),
            b"zlib"
        );
        let mut raw =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        raw.write_all(b"raw").unwrap();
        assert_eq!(
            decode(&raw.finish().unwrap(), &[Coding::Deflate], 100).unwrap(),
            b"raw"
        );
        // A bomb: 10 MB of zeros in a few kilobytes stops at the bound.
        let bomb = gzip(&vec![0u8; 10 << 20]);
        assert!(bomb.len() < 20_000);
        assert_eq!(
            decode(&bomb, &[Coding::Gzip], 1 << 20),
            Err(CodingError::TooLarge { limit: 1 << 20 })
        );
        assert!(matches!(
            decode(b"not gzip", &[Coding::Gzip], 100),
            Err(CodingError::Corrupt { coding: "gzip", .. })
        ));
        // Cut short: what decodes is still read.
        let whole = gzip(&b"abc".repeat(10_000));
        assert!(looks_gzip(&whole));
        let part = gunzip_what_decodes(&whole[..whole.len() / 2], 1 << 20);
        assert!(part.starts_with(b"abcabc"));
    }
}
