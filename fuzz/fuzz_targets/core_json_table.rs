//! trace-core's JSON integers and header-row tables on arbitrary JSON text.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    trace_core::json::fuzz_table(data);
});
