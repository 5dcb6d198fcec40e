//! Integration tests of trac-x64dbg: one binary, one module per area.

mod common;
mod fixtures;
mod properties;
mod realdata;
