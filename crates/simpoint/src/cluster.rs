//! SimPoint's clustering method.
