//! Read, query, validate and write Intel Dynamic Control-Flow Graph files (format 1.00), as
//! Intel Pin and SDE write them (`*.dcfg.json.bz2`).
//!
//! Specification: `specs/formats/intel-dcfg-format-1.00.md`. Not implemented yet: see the
//! `dcfg` issue.
