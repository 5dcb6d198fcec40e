//! Basic-block vector files (`.bb`): reading and writing.
