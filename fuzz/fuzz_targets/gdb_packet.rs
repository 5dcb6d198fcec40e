//! `tracekit gdbserver`'s session (gdbstub's packet parser and the replay behind it) on
//! arbitrary bytes from GDB: answers or an error ending the session, never a panic.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    tracekit::fuzz_target("gdb_packet", data);
});
