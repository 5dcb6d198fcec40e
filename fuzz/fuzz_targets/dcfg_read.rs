//! dcfg: read arbitrary bytes as a DCFG, then validate, query, draw and rewrite it.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_read", data);
});
