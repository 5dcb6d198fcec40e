//! gdb-tfile: frames and blocks (slice reader, stream reader, index, write-back).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("tfile_read", data);
});
