//! amber TT6/TT6E: read, write back (bytes must match), read again (model must match).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("amber_roundtrip", data);
});
