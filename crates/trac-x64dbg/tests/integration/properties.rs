//! Property tests (filled below).
