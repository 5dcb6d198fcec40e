//! Decode and encode Intel DCFG-Trace files: per-thread edge sequences compressed with a
//! modified Base64, repeat/dictionary substitution and transition-table bit codes.
//!
//! Specification: `specs/formats/intel-dcfg-format-1.00.md`, section 3. Not implemented
//! yet: see the `dcfg-trace` issue.
