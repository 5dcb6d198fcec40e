//! `tracekit` commands for the dcfg_trace format.

use super::{Ctx, not_yet};
use crate::{CliError, Input};

const NAME: &str = "dcfg_trace";

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

/// `tracekit encode`: JSON Lines edge lists plus a DCFG → a DCFG-Trace file.
pub fn encode(_args: &crate::EncodeArgs, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "encode"))
}
