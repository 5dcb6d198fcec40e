//! The HTTP/1.1 layer of `tracekit serve` (work in progress).
