//! `tracekit serve`: a trace explorer in the browser, served over HTTP on 127.0.0.1.
//!
//! (Work in progress: the endpoints are documented here as they land.)

pub mod api;
pub mod http;

use std::ffi::OsString;
use std::io::Write;

use clap::Args;
use trace_registry::{Handler, Input, Options};

use crate::CliError;

/// The page, embedded in the binary.
pub const INDEX_HTML: &str = include_str!("assets/index.html");
/// The page's script.
pub const APP_JS: &str = include_str!("assets/app.js");
/// The page's style sheet.
pub const STYLE_CSS: &str = include_str!("assets/style.css");

/// Arguments of `tracekit serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The trace file (any format with an instruction stream).
    pub file: OsString,
    /// The port (0: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Bind this address instead of 127.0.0.1 (prints a warning).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Open the page in the system browser.
    #[arg(long)]
    pub open: bool,
}

/// Serves the trace until killed.
///
/// # Errors
///
/// Not yet implemented.
pub fn run(
    _handler: &dyn Handler,
    _input: Input,
    _options: &Options,
    _args: &ServeArgs,
    _out: &mut dyn Write,
    _err: &mut dyn Write,
) -> Result<(), CliError> {
    Err(CliError::Usage(
        "`tracekit serve` is not implemented yet".into(),
    ))
}
