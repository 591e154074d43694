//! The parts of `vak-mcp-load` that vak's end-to-end tests use too: the stdio MCP client and the
//! measurement of memory per call in flight, so that the test and the tool measure the same way.

pub mod inflight;
pub mod stdio;
