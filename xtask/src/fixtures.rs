//! `cargo xtask fixtures [--check]`: regenerate `testdata/` from the writers, or check that
//! the committed files are what the writers make (rust-analyzer's "ensure file contents").

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::{Flags, formats, root};

/// The generated files, by path relative to `testdata/`.
#[derive(Default)]
pub struct Fixtures {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl Fixtures {
    /// Adds a generated file at `path` (relative to `testdata/`, e.g. "x64dbg/basic.trace64").
    pub fn add(&mut self, path: impl Into<PathBuf>, bytes: impl Into<Vec<u8>>) {
        let path = path.into();
        assert!(
            self.files.insert(path.clone(), bytes.into()).is_none(),
            "fixture {} generated twice",
            path.display()
        );
    }
}

pub fn generate() -> Fixtures {
    let mut fx = Fixtures::default();
    for f in formats::ALL {
        if let Some(add) = f.fixtures {
            add(&mut fx);
        }
    }
    fx
}

/// Writes the fixtures (`check = false`) or compares them with the files on disk.
pub fn run(check: bool) -> Result<(), String> {
    let dir = root().join("testdata");
    let mut stale = Vec::new();
    for (rel, bytes) in generate().files {
        let path = dir.join(&rel);
        let same = std::fs::read(&path).is_ok_and(|old| old == bytes);
        if same {
            continue;
        }
        if check {
            stale.push(rel.display().to_string());
        } else {
            std::fs::create_dir_all(path.parent().unwrap())
                .map_err(|e| format!("{}: {e}", path.display()))?;
            std::fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("wrote testdata/{}", rel.display());
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} fixture(s) differ from what the writers make: {}\nrun `cargo xtask fixtures` and commit the result",
            stale.len(),
            stale.join(", ")
        ))
    }
}

pub fn task(args: &[String]) -> Result<(), String> {
    let flags = Flags::parse(args, &[], &["check"])?;
    run(flags.has("check"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn fixtures_are_up_to_date() {
        super::run(true).unwrap();
    }

    #[test]
    fn fixtures_are_deterministic() {
        assert!(super::generate().files == super::generate().files);
    }
}
