//! amber TT6/TT6E: read, write back (bytes must match), read again (model must match).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    amber_tt6::fuzz_roundtrip(data);
});
