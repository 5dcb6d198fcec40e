//! dcfg-trace: fuzz_bits (see the crate's `fuzz_bits` entry point).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_trace_bits", data);
});
