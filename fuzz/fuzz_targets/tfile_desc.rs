//! gdb-tfile: the description section parser (status, tp, tsv, tdesc lines).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("tfile_desc", data);
});
