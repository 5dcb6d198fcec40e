//! `tracekit serve`'s HTTP request parser on arbitrary bytes: a request or a refusal with
//! a 4xx/5xx status, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("http_request", data);
});
