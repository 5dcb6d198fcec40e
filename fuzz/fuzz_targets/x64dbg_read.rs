//! trac-x64dbg: every reader (blocks, replay, index and seeks, streaming) and a re-write.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("x64dbg_read", data);
});
