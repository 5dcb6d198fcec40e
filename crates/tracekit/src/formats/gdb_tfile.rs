//! `tracekit` commands for the gdb_tfile format.

use super::{Ctx, not_yet};
use crate::{CliError, Input};

const NAME: &str = "gdb_tfile";

/// `tracekit info`.
pub fn info(_input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "info"))
}

/// `tracekit dump`.
pub fn dump(_input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "dump"))
}

/// `tracekit validate`.
pub fn validate(_input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "validate"))
}
