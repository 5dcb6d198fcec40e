//! Reads a DCFG and writes it back: as plain JSON (Intel's layout), DOT (`--dot [LOOP]`) or
//! loop CSV (`--loops`), on stdout.
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: dcfg_rewrite FILE [--dot [LOOP] | --loops]")?;
    let d = dcfg::Dcfg::from_path(path)?;
    let out = std::io::stdout();
    match args.next().as_deref() {
        Some("--dot") => {
            let opts = dcfg::DotOptions {
                loop_head: args.next().and_then(|s| s.parse().ok()),
                ..Default::default()
            };
            d.write_dot(out, &opts)?;
        }
        Some("--loops") => d.write_loops_csv(out)?,
        _ => out.lock().write_all(&d.to_vec())?,
    }
    Ok(())
}
