//! DCFG graph navigation (filled in below).

use pyo3::prelude::*;

/// A DCFG's graph.
#[pyclass(module = "tracekit", frozen)]
pub(crate) struct Graph {
    dcfg: std::sync::Arc<dcfg::Dcfg>,
}

impl Graph {
    pub(crate) fn new(d: dcfg::Dcfg) -> Graph {
        Graph {
            dcfg: std::sync::Arc::new(d),
        }
    }
}

#[pymethods]
impl Graph {
    /// The number of processes.
    fn __len__(&self) -> usize {
        self.dcfg.processes.len()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Graph>()
}
