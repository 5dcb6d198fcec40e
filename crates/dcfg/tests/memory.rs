//! Peak memory of reading (issue: at most twice the uncompressed JSON), counted by a global
//! allocator that records the most bytes held at once.
//!
//! For `Dcfg::parse` the caller's buffer counts too: buffer plus everything allocated while
//! parsing must stay within 2× the JSON. The counter sees requested bytes, not the
//! allocator's own overhead (a few percent: see `Dcfg::parse`), so the check
//! leaves a margin: 1.95×.
//!
//! One test only: the counter is global, and other tests running beside it would disturb it.
#![allow(clippy::expect_used, clippy::panic)]

use dcfg::Dcfg;
use dcfg::testgen::{SynthConfig, synthetic};
use peakmem_alloc::{INSTRUMENTED_SYSTEM, PeakMemAlloc, PeakMemAllocTrait};

mod realdata;
use realdata::realdata;

#[global_allocator]
static ALLOCATOR: &PeakMemAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// The most the reader may hold, with the caller's buffer, relative to the JSON.
const LIMIT: f64 = 1.95;

/// The peak bytes allocated while `f` runs, beyond what was held before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATOR.reset_peak_memory();
    let out = f();
    (out, ALLOCATOR.get_peak_memory())
}

/// Checks both readers on `json`; returns the ratios (slice with its buffer, stream).
fn check(name: &str, json: &[u8]) -> (f64, f64) {
    let len = json.len() as f64;
    let (d, slice_peak) = peak_of(|| Dcfg::parse(json).expect("reads"));
    drop(d);
    let (d, stream_peak) = peak_of(|| Dcfg::from_reader(json).expect("reads"));
    drop(d);
    let slice = (slice_peak as f64 + len) / len;
    let stream = stream_peak as f64 / len;
    eprintln!(
        "{name}: {} bytes of JSON; parse with the buffer {slice:.3}x, from_reader {stream:.3}x",
        json.len()
    );
    assert!(slice <= LIMIT, "{name}: parse peaks at {slice:.3}x");
    assert!(stream <= LIMIT, "{name}: from_reader peaks at {stream:.3}x");
    (slice, stream)
}

#[test]
fn reading_peaks_below_twice_the_json() {
    // A synthetic file in Intel's layout: 4 images, 4 threads, 24,000 blocks (about 6 MB).
    let json = synthetic(SynthConfig {
        images: 4,
        routines_per_image: 1_000,
        threads: 4,
        seed: 3,
    })
    .to_vec();
    let (slice, _) = check("synthetic", &json);
    // The model alone is most of it: a reader that kept a copy of the text would fail.
    assert!(slice > 1.5, "synthetic: {slice:.3}x is implausibly small");
    drop(json);

    if let Some(p) = realdata("pinball2elf_dijkstra_omp_8t.dcfg.json") {
        let json = std::fs::read(p).expect("readable");
        check("dijkstra", &json);
    }
    if let Some(p) = realdata("passlab_simple_loop_whole.dcfg.json.bz2") {
        // Written back, the model gives the original JSON byte for byte (tests/real.rs).
        let json = Dcfg::from_path(&p).expect("reads").to_vec();
        let (_, stream) = check("passlab", &json);
        // From the compressed file: the same, plus the bzip2 decoder's fixed state (about
        // 3.5 MiB for `BZh9` blocks), which does not grow with the file.
        let (d, peak) = peak_of(|| Dcfg::from_path(&p).expect("reads"));
        drop(d);
        let beyond = peak as f64 - stream * json.len() as f64;
        eprintln!("passlab .bz2: from_path holds {beyond:.0} bytes more than from_reader");
        assert!(beyond < 4.5 * 1024.0 * 1024.0, "{beyond:.0} bytes");
    }
}
