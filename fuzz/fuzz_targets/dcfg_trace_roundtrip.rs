//! dcfg-trace: fuzz_roundtrip (see the crate's `fuzz_roundtrip` entry point).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_trace_roundtrip", data);
});
