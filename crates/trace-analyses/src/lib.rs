//! The analyses users open traces for, written once over the model's instruction stream
//! ([`Steps`](trace_model::steps::Steps)) and block view
//! ([`Blocks`](trace_model::blocks::Blocks)): the register state and memory at any
//! instruction, cross-references, where a value came from (`origin`), call trees, the diff
//! of two runs and basic-block vectors. Each answer is a value that serialises to the JSON
//! the matching `tracekit` command prints with `--json`; each works for every format whose
//! handler gives steps (or blocks).
//!
//! Where a `.tkidx` sidecar (`trace-index`) is beside the trace, `mem`, `xref` and
//! `origin` answer from it instead of reading the steps.
//!
//! # Example
//!
//! The registers before instruction 10 of an x64dbg trace (`tracekit state --at 10`):
//!
//! ```
//! use trace_analyses::state::state;
//! use trace_registry::{Ctx, Input, Options};
//!
//! let mut input = Input::open("../../testdata/x64dbg/basic.trace64".as_ref())?;
//! let handler = trace_registry::detect(&input).expect("an x64dbg trace");
//! let options = Options::default();
//! let at = state(handler, &mut input, &mut Ctx::new(&options), 10)?;
//! assert_eq!(at.i, 10);
//! assert!(at.get("rip").is_some());
//! # Ok::<(), trace_registry::Error>(())
//! ```

pub mod bbv;
pub mod calls;
pub mod diff;
pub mod mem;
pub mod origin;
pub mod state;
pub mod symbols;
pub mod xref;
