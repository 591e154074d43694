//! `vak:tool/log`: bounded log lines kept in the call record. They never reach a protocol stream
//! as guest output; a client that asked for logs (MCP `logging/setLevel`) gets the kept lines of
//! its level and above as log notifications, through the call's [`super::client::ClientChannel`].
//! Its per-call state is the call's [`LogBuffer`].

use super::client::LogLevel;
use super::{
    Broker, Capability, CapabilityBroker, Effects, GrantedScope, HasBroker, Scope, SectionError,
};
use crate::bindings::vak::tool::log::{Host, Level, add_to_linker};
use crate::record::LogLine;
use wasmtime::component::{HasSelf, Linker};

/// The `log` broker. Its grant has no scopes (an empty policy section).
pub struct Log;

impl<T: HasBroker> CapabilityBroker<T> for Log {
    fn link(&self, linker: &mut Linker<T>) -> wasmtime::Result<()> {
        add_to_linker::<T, HasSelf<Broker>>(linker, T::broker)
    }
}

/// The policy section, as written: `log = {}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogGrantFile {}

/// A `log` grant: it has no scopes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unscoped;

impl super::GrantSection for Log {
    fn capability(&self) -> Capability {
        Capability::Log
    }

    fn compile(&self, _tool: &str, section: toml::Value) -> Result<Scope, SectionError> {
        super::section::<LogGrantFile>(section).map(|_| Scope::new(Unscoped))
    }
}

impl GrantedScope for Unscoped {
    fn covers(&self, _claimed: &[String]) -> Result<(), String> {
        Ok(())
    }

    fn describe(&self) -> String {
        "no scopes".to_string()
    }

    /// Lines stay in the call record (and go to the caller's own client).
    fn effects(&self) -> Effects {
        Effects::default()
    }

    fn same(&self, other: &dyn GrantedScope) -> bool {
        super::grant::same_as(self, other)
    }
}

/// Lines kept per call; further lines are counted and dropped.
pub const MAX_LINES: usize = 256;
/// Bytes kept per line; a longer line is cut at a character boundary.
pub const MAX_LINE_BYTES: usize = 2048;

/// The bounded log of one call.
#[derive(Debug, Default)]
pub struct LogBuffer {
    pub(crate) lines: Vec<LogLine>,
    pub(crate) dropped: u64,
}

impl LogBuffer {
    /// Keep one line; `None` when it was dropped, else the line as kept.
    fn push<'m>(&mut self, level: &str, message: &'m str) -> Option<&'m str> {
        if self.lines.len() >= MAX_LINES {
            self.dropped += 1;
            return None;
        }
        let mut end = message.len().min(MAX_LINE_BYTES);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        self.lines.push(LogLine {
            level: level.to_string(),
            message: message[..end].to_string(),
        });
        Some(&message[..end])
    }
}

impl Host for Broker {
    async fn write(&mut self, level: Level, message: String) {
        // Logging is allowed only when granted; an ungranted binary cannot even import it, so this
        // refusal is for the describe phase, where nothing is granted.
        if self.authorize(Capability::Log).is_err() {
            self.log.dropped += 1;
            return;
        }
        let level = match level {
            Level::Debug => LogLevel::Debug,
            Level::Info => LogLevel::Info,
            Level::Warn => LogLevel::Warn,
            Level::Error => LogLevel::Error,
        };
        let kept = self.log.push(level.as_str(), &message);
        // Only kept lines go to the client: the same bound as the record.
        // Redacted as the record's copy will be: a secret the tool got hold of does not reach
        // the client through its log either.
        if let (Some(line), Some(client)) = (kept, &self.client)
            && client.log_level().is_some_and(|min| level >= min)
        {
            if self.scrub.finds(line.as_bytes()) {
                client.log(level, &self.scrub.redact(line).0);
            } else {
                client.log(level, line);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_line_length_are_bounded() {
        let mut buf = LogBuffer::default();
        for _ in 0..MAX_LINES + 10 {
            buf.push("info", &"é".repeat(MAX_LINE_BYTES));
        }
        assert_eq!(buf.lines.len(), MAX_LINES);
        assert_eq!(buf.dropped, 10);
        assert!(buf.lines.iter().all(|l| l.message.len() <= MAX_LINE_BYTES));
    }
}
