//! `diff` of a synthetic x64dbg trace with an identical copy (the goal: at least
//! 50 M instructions compared per second when the traces are equal), next to one pass of
//! the steps view over one copy and a plain comparison of the two copies' bytes.

#![allow(clippy::unwrap_used, clippy::arithmetic_side_effects, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use trace_analyses::diff::{DiffOptions, diff};
use trace_registry::{Ctx, Input, Options};

const INSTRUCTIONS: u64 = 1_000_000;

/// Diffs two inputs already in memory (as memory-mapped files are); returns the count.
fn diff_equal(a: &mut Input, b: &mut Input) -> u64 {
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = Options::default();
    let mut sa = handler.steps(a, &mut Ctx::new(&options)).unwrap();
    let mut sb = handler.steps(b, &mut Ctx::new(&options)).unwrap();
    let s = diff(&mut *sa, &mut *sb, &DiffOptions::default(), &mut |_| Ok(())).unwrap();
    assert!(s.is_equal());
    s.compared
}

fn steps(input: &mut Input) -> u64 {
    let handler = trace_registry::by_name("x64dbg").unwrap();
    let options = Options::default();
    let mut steps = handler.steps(input, &mut Ctx::new(&options)).unwrap();
    let mut n = 0;
    while let Some(s) = steps.next_step() {
        n += s.unwrap().pc & 1;
    }
    n
}

fn bench(c: &mut Criterion) {
    let bytes = trac_x64dbg::testgen::bench_trace(INSTRUCTIONS, 3, 300);
    let mut a = Input::from_bytes("a", bytes.clone()).unwrap();
    let mut b = Input::from_bytes("b", bytes).unwrap();
    let mut g = c.benchmark_group("x64dbg diff");
    g.throughput(Throughput::Elements(INSTRUCTIONS));
    g.sample_size(10);
    g.bench_function("diff (equal)", |bench| {
        bench.iter(|| diff_equal(black_box(&mut a), black_box(&mut b)))
    });
    g.bench_function("steps (one side)", |bench| {
        bench.iter(|| steps(black_box(&mut a)))
    });
    // The floor: comparing the two copies' bytes.
    let x = trac_x64dbg::testgen::bench_trace(INSTRUCTIONS, 3, 300);
    let y = x.clone();
    g.bench_function("memcmp of the copies", |bench| {
        bench.iter(|| black_box(&x[..]) == black_box(&y[..]))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
