//! Flame graphs (`tracekit flame`): folded stacks (`frame;frame count`, as `calls --folded`
//! prints them) drawn as an SVG, after Brendan Gregg's `flamegraph.pl`: one rectangle per
//! frame, as wide as the instructions under it, its callers below it, siblings in
//! alphabetical order (the x-axis is not time), colours from the "hot" palette chosen by the
//! name's hash, each frame's name and count in its tooltip (`<title>`).
//!
//! Drawn here rather than by the `inferno` crate: the layout is sixty lines, and inferno is
//! CDDL-1.0, a licence outside the workspace's `deny.toml` list.
//!
//! ```
//! let folded = vec![("thread 1;main".to_owned(), 3), ("thread 1;main;f".to_owned(), 2)];
//! let mut svg = Vec::new();
//! trace_sinks::flame::write_svg(&mut svg, &folded, "calls", "instructions")?;
//! let svg = String::from_utf8(svg).unwrap();
//! assert!(svg.starts_with("<?xml"));
//! assert!(svg.contains("<title>main (5 instructions, 100.00%)</title>"));
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// The image's width in pixels.
const WIDTH: f64 = 1200.0;
/// A frame's height.
const FRAME: f64 = 16.0;
/// The margin left and right.
const PAD: f64 = 10.0;
/// The space above the frames (the title).
const TOP: f64 = 36.0;
/// Frames narrower than this (pixels) are left out.
const MIN_WIDTH: f64 = 0.1;

struct Node {
    name: String,
    total: u64,
    children: BTreeMap<String, usize>,
}

/// Writes the flame graph of `folded` (stack, count) lines: `title` at the top, counts
/// called `unit` in the tooltips.
///
/// # Errors
///
/// A write error.
pub fn write_svg(
    out: &mut dyn Write,
    folded: &[(String, u64)],
    title: &str,
    unit: &str,
) -> io::Result<()> {
    let mut nodes = vec![Node {
        name: "all".to_owned(),
        total: 0,
        children: BTreeMap::new(),
    }];
    for (stack, count) in folded {
        let mut at = 0usize;
        if let Some(root) = nodes.get_mut(0) {
            root.total = root.total.saturating_add(*count);
        }
        for frame in stack.split(';') {
            let next = nodes.get(at).and_then(|n| n.children.get(frame).copied());
            let child = match next {
                Some(c) => c,
                None => {
                    let c = nodes.len();
                    nodes.push(Node {
                        name: frame.to_owned(),
                        total: 0,
                        children: BTreeMap::new(),
                    });
                    if let Some(n) = nodes.get_mut(at) {
                        n.children.insert(frame.to_owned(), c);
                    }
                    c
                }
            };
            if let Some(n) = nodes.get_mut(child) {
                n.total = n.total.saturating_add(*count);
            }
            at = child;
        }
    }
    let grand = nodes.first().map_or(0, |n| n.total).max(1);
    // Depth-first: (node, depth, x in counts).
    let mut placed: Vec<(usize, usize, u64)> = Vec::new();
    let mut todo = vec![(0usize, 0usize, 0u64)];
    let mut deepest = 0usize;
    #[allow(clippy::cast_precision_loss)] // pixels
    let px = |count: u64| count as f64 / grand as f64 * (WIDTH - 2.0 * PAD);
    while let Some((k, depth, x)) = todo.pop() {
        let Some(n) = nodes.get(k) else { continue };
        if px(n.total) < MIN_WIDTH {
            continue;
        }
        placed.push((k, depth, x));
        deepest = deepest.max(depth);
        let mut cx = x;
        for &c in n.children.values() {
            todo.push((c, depth.saturating_add(1), cx));
            cx = cx.saturating_add(nodes.get(c).map_or(0, |n| n.total));
        }
    }
    #[allow(clippy::cast_precision_loss)] // pixels
    let height = TOP + (deepest as f64 + 1.0) * FRAME + 2.0 * PAD;
    let mut s = String::with_capacity(placed.len().saturating_mul(200).saturating_add(1024));
    let _ = writeln!(
        s,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" xmlns="http://www.w3.org/2000/svg">
<rect x="0" y="0" width="100%" height="100%" fill="#f8f8f0"/>
<text x="{}" y="24" text-anchor="middle" font-family="monospace" font-size="17">{}</text>"##,
        WIDTH / 2.0,
        escape(title)
    );
    for (k, depth, x) in placed {
        let Some(n) = nodes.get(k) else { continue };
        let (x0, w) = (PAD + px(x), px(n.total));
        #[allow(clippy::cast_precision_loss)] // pixels
        let y = height - PAD - (depth as f64 + 1.0) * FRAME;
        #[allow(clippy::cast_precision_loss)] // a percentage
        let share = n.total as f64 * 100.0 / grand as f64;
        let (r, g, b) = hot(&n.name);
        let name = escape(&n.name);
        let _ = write!(
            s,
            "<g><title>{name} ({} {unit}, {share:.2}%)</title><rect x=\"{x0:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"rgb({r},{g},{b})\" rx=\"2\"/>",
            n.total,
            FRAME - 1.0
        );
        // About 7 pixels a character at 12px monospace.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a count
        let fits = ((w - 6.0) / 7.0).max(0.0) as usize;
        if fits >= 3 {
            let label: String = if n.name.chars().count() > fits {
                let mut t: String = n.name.chars().take(fits.saturating_sub(2)).collect();
                t.push_str("..");
                t
            } else {
                n.name.clone()
            };
            let _ = write!(
                s,
                "<text x=\"{:.2}\" y=\"{:.1}\" font-family=\"monospace\" font-size=\"12\">{}</text>",
                x0 + 3.0,
                y + FRAME - 4.5,
                escape(&label)
            );
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    out.write_all(s.as_bytes())
}

/// `flamegraph.pl`'s "hot" palette, chosen by the name's hash (FNV-1a) rather than at
/// random, so that a frame keeps its colour from run to run.
fn hot(name: &str) -> (u64, u64, u64) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (
        (h % 50).saturating_add(205),
        (h >> 16) % 230,
        (h >> 32) % 55,
    )
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Widths follow the counts: a frame with half the instructions is half as wide.
    #[test]
    fn widths_follow_the_counts() {
        let folded = vec![
            ("thread 1;a".to_owned(), 1),
            ("thread 1;a;b<x>".to_owned(), 1),
            ("thread 1;c".to_owned(), 2),
        ];
        let mut out = Vec::new();
        write_svg(&mut out, &folded, "t", "instructions").unwrap();
        let svg = String::from_utf8(out).unwrap();
        let width_of = |name: &str| -> f64 {
            let at = svg.find(&format!("<title>{name} (")).unwrap();
            let rest = &svg[at..];
            let w = rest.find("width=\"").unwrap() + 7;
            rest[w..w + rest[w..].find('"').unwrap()].parse().unwrap()
        };
        let all = width_of("all");
        assert!((all - (WIDTH - 2.0 * PAD)).abs() < 0.01);
        assert!((width_of("a") - all / 2.0).abs() < 0.01);
        assert!((width_of("b&lt;x&gt;") - all / 4.0).abs() < 0.01);
        assert!((width_of("thread 1") - all).abs() < 0.01);
        assert!(svg.contains("<title>c (2 instructions, 50.00%)</title>"));
    }
}
