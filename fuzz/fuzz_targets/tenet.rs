//! Tenet text traces on arbitrary bytes: the slice and stream readers (which must agree),
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("tenet", data);
});
