//! `tracekit` commands for the x64dbg format.

use super::{Ctx, not_yet};
use crate::{CliError, Input};

const NAME: &str = "x64dbg";

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
