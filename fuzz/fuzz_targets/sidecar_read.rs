//! The sidecar index reader (`tracekit index` files) on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("sidecar_read", data);
});
