//! dcfg-trace: fuzz_expand (see the crate's `fuzz_expand` entry point).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_trace_expand", data);
});
