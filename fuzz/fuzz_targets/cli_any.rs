//! Every tracekit command, with detection and with every forced format, on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("cli_any", data);
});
