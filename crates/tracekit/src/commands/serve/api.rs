//! The JSON API of `tracekit serve` (work in progress).
