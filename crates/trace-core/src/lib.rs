//! Shared building blocks of the tracekit format crates.
//!
//! Every format crate of the workspace (`trac-x64dbg`, `gdb-tfile`, `dcfg`, `dcfg-trace`,
//! `amber-tt6`) builds on the few types here, and only on types at least two of them use:
//!
//! - [`Cursor`]: a bounds-checked reader over `&[u8]` that knows the absolute file offset of
//!   its data, also for sub-slices, so every error can say where it happened;
//! - [`Offset`] and the error building blocks [`UnexpectedEof`], [`LimitExceeded`] and
//!   [`BadValue`], which the crates' own error enums embed; their messages end with
//!   `at offset 0x…`; the [`Located`] trait is how every crate's error tells a program
//!   where it happened;
//! - [`json`]: the JSON pull lexer of the DCFG and DCFG-Trace readers (slice or `io::Read`,
//!   exact integers from numbers or hex strings, JSON paths and offsets in errors);
//! - [`Address`] and [`ThreadId`], small value types that display the way users expect;
//! - [`hex`]: lowercase hex encoding and decoding of byte strings;
//! - [`rng::SplitMix64`]: the deterministic generator behind synthetic traces and fixtures.
//!
//! # Example
//!
//! ```
//! use trace_core::{Cursor, Offset};
//!
//! // A sub-slice that starts at file offset 0x100.
//! let mut cur = Cursor::with_base(&[0x34, 0x12, 0xff], 0x100);
//! assert_eq!(cur.read_u16_le()?, 0x1234);
//! assert_eq!(cur.offset(), Offset(0x102));
//! let err = cur.read_u32_le().unwrap_err();
//! assert_eq!(err.to_string(), "unexpected end of input: needed 4 bytes, 1 available at offset 0x102");
//! # Ok::<(), trace_core::UnexpectedEof>(())
//! ```

mod cursor;
mod error;
pub mod hex;
pub mod json;
pub mod rng;
mod types;

pub use cursor::Cursor;
pub use error::{BadValue, LimitExceeded, Located, UnexpectedEof};
pub use types::{Address, Offset, ThreadId};
