//! xtask hooks for dcfg-trace.

use super::FormatTasks;

pub const TASKS: FormatTasks = FormatTasks {
    name: "dcfg-trace",
    fixtures: None,
    synth: None,
    bench: None,
};
