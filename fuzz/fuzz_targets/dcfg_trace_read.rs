//! dcfg-trace: fuzz_read (see the crate's `fuzz_read` entry point).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_trace_read", data);
});
