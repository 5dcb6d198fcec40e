//! `.simpoints` and `.weights` files (SimPoint's outputs) on arbitrary bytes: read, then
//! write -> read of what was read must give it back.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("simpoints_read", data);
});
