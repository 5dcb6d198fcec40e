//! xtask hooks for amber.

use super::FormatTasks;

pub const TASKS: FormatTasks = FormatTasks {
    name: "amber",
    fixtures: None,
    synth: None,
    bench: None,
};
