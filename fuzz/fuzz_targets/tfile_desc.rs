//! gdb-tfile: the description section parser (status, tp, tsv, tdesc lines).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    gdb_tfile::fuzz_description(data);
});
