//! amber TT6/TT6E (slice and stream readers, which must agree) and FULL on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("amber_read", data);
});
