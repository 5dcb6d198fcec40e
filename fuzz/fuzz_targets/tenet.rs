//! Tenet text traces on arbitrary bytes: the slice and stream readers (which must agree),
//! then read → write → read (the model must survive).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tenet_trace::fuzz_read(data);
});
