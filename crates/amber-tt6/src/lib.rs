//! Read and write Apple CHUD amber traces of PowerPC programs: TT6 and TT6E instruction
//! traces (with escape and thread-sync records) and FULL register-state traces.
//!
//! Specification: `specs/formats/amber-tt6-format.md`. Not implemented yet: see the
//! `amber-tt6` issue.
