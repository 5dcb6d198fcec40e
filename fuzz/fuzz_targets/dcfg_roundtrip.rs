//! dcfg: whatever reads must write and read back to the same model.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("dcfg_roundtrip", data);
});
