//! `tracekit` commands for the dcfg format.

use super::{Ctx, not_yet};
use crate::{CliError, Input};

const NAME: &str = "dcfg";

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

/// `tracekit dot`.
pub fn dot(_input: Input, _args: &crate::DotArgs, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "dot"))
}

/// `tracekit loops` (CSV).
pub fn loops(_input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(NAME, "loops"))
}
