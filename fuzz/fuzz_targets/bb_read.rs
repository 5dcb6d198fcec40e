//! `.bb` basic-block vector files on arbitrary bytes: whole and buffered reads (which must
//! agree), then write -> read of what was read.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("bb_read", data);
});
