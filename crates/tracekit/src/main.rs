//! The `tracekit` binary; everything is in the library half.

/// See the workspace `Cargo.toml`: exports allocate and free a batch of columns at a time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(tracekit::main_with_args(std::env::args_os()))
}
