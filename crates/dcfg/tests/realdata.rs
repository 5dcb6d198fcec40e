//! Where the real files are: `../shared/realdata/dcfg/` beside the repository (never copied
//! into it). Shared by the test binaries.

use std::path::PathBuf;

/// The path of real file `name`; `None` (the test skips it) if it is not there, unless
/// `TRACEKIT_REQUIRE_REALDATA=1` (as in CI) makes its absence a failure.
pub fn realdata(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realdata/dcfg")
        .join(name);
    if p.exists() {
        Some(p)
    } else if std::env::var_os("TRACEKIT_REQUIRE_REALDATA").is_some_and(|v| v == "1") {
        panic!("{} is missing", p.display());
    } else {
        eprintln!("skipped: {} is not there", p.display());
        None
    }
}
