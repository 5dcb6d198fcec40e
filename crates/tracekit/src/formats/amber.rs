//! `tracekit` commands for the amber TT6, TT6E and FULL formats.

use super::{Ctx, not_yet};
use crate::{CliError, Format, Input};

/// `tracekit info`.
pub fn info(format: Format, _input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(format.name(), "info"))
}

/// `tracekit dump`.
pub fn dump(format: Format, _input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(format.name(), "dump"))
}

/// `tracekit validate`.
pub fn validate(format: Format, _input: Input, _ctx: &mut Ctx<'_>) -> Result<(), CliError> {
    Err(not_yet(format.name(), "validate"))
}

/// `tracekit convert FILE --to din`.
pub fn convert(
    format: Format,
    _input: Input,
    _to: &str,
    _ctx: &mut Ctx<'_>,
) -> Result<(), CliError> {
    Err(not_yet(format.name(), "convert"))
}
