//! The `tracekit` binary; everything is in the library half.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(tracekit::main_with_args(std::env::args_os()))
}
