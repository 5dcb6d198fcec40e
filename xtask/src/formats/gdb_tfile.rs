//! xtask hooks for gdb-tfile.

use super::FormatTasks;

pub const TASKS: FormatTasks = FormatTasks {
    name: "gdb-tfile",
    fixtures: None,
    synth: None,
    bench: None,
};
