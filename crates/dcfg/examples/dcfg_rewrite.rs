//! Reads a DCFG and writes it back: as plain JSON (Intel's layout), DOT (`--dot [LOOP]`) or
//! loop CSV (`--loops`), or only counts (`--count`), on stdout.
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: dcfg_rewrite FILE [--dot [LOOP] | --loops | --count]")?;
    let stream = std::env::var_os("DCFG_STREAM").is_some();
    let d = if std::env::var_os("DCFG_SLICE").is_some() {
        let bytes = std::fs::read(&path)?;
        let t = std::time::Instant::now();
        let d = dcfg::Dcfg::parse(&bytes)?;
        eprintln!(
            "parse: {:.1} MiB in {:.2} s",
            bytes.len() as f64 / 1048576.0,
            t.elapsed().as_secs_f64()
        );
        d
    } else if stream {
        dcfg::Dcfg::from_reader(std::fs::File::open(&path)?)?
    } else {
        dcfg::Dcfg::from_path(&path)?
    };
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
        Some("--count") => {
            let p = d.processes.first().ok_or("no process")?;
            writeln!(
                out.lock(),
                "{} blocks, {} edges",
                p.blocks().count(),
                p.edge_count()
            )?;
        }
        _ => out.lock().write_all(&d.to_vec())?,
    }
    Ok(())
}
