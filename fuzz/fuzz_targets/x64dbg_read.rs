//! trac-x64dbg: every reader (blocks, replay, index and seeks, streaming) and a re-write.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trac_x64dbg::fuzz_read(data);
});
