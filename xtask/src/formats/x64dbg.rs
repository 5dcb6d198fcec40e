//! xtask hooks for x64dbg.

use super::FormatTasks;

pub const TASKS: FormatTasks = FormatTasks {
    name: "x64dbg",
    fixtures: None,
    synth: None,
    bench: None,
};
