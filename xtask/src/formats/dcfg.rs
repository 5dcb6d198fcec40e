//! xtask hooks for dcfg.

use super::FormatTasks;

pub const TASKS: FormatTasks = FormatTasks {
    name: "dcfg",
    fixtures: None,
    synth: None,
    bench: None,
};
