//! The owned, typed model of a trace file's description section (and of whole files, for the
//! writer). The reader produces it, the writer serialises it exactly as GDB's `tsave` does.

/// Why tracing stopped (the status line's reason key; GDB's `trace_stop_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// `tunknown`: no reason known (also when the status line names none).
    Unknown,
    /// `tnotrun`: tracing has not run (or is still running).
    NotRun,
    /// `tstop`: a `tstop` command, with an optional description.
    Stop,
    /// `tfull`: the trace buffer filled up.
    BufferFull,
    /// `tdisconnected`: GDB disconnected.
    Disconnected,
    /// `tpasscount`: a tracepoint reached its pass count.
    PassCount,
    /// `terror`: an error, with an optional description.
    Error,
}

impl StopReason {
    /// The key as written in the status line, e.g. `tstop`.
    #[must_use]
    pub fn key(self) -> &'static str {
        match self {
            StopReason::Unknown => "tunknown",
            StopReason::NotRun => "tnotrun",
            StopReason::Stop => "tstop",
            StopReason::BufferFull => "tfull",
            StopReason::Disconnected => "tdisconnected",
            StopReason::PassCount => "tpasscount",
            StopReason::Error => "terror",
        }
    }

    /// Whether the status line carries a description for this reason (`tstop`, `terror`).
    #[must_use]
    pub fn has_description(self) -> bool {
        matches!(self, StopReason::Stop | StopReason::Error)
    }

    /// What GDB's `tstatus` says, e.g. "Trace stopped by a tstop command".
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::Unknown => "Run/stop status is unknown",
            StopReason::NotRun => "Trace has not run (or is running)",
            StopReason::Stop => "Trace stopped by a tstop command",
            StopReason::BufferFull => "Trace stopped because the buffer was full",
            StopReason::Disconnected => "Trace stopped because of disconnection",
            StopReason::PassCount => "Trace stopped by tracepoint pass count",
            StopReason::Error => "Trace stopped by an error",
        }
    }
}

/// The `status` line: a `qTStatus` reply (notes §2). Numbers are hex in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// Whether tracing was still running when the file was saved (`1` as first character).
    pub running: bool,
    /// Why tracing stopped.
    pub stop_reason: StopReason,
    /// The stop description (`tstop`/`terror` only), hex-decoded. `None` for the old form
    /// `tstop:<num>`; `Some(empty)` for `tstop::<num>`.
    pub stop_description: Option<Vec<u8>>,
    /// The stopping tracepoint (meaningful for `tpasscount` and `terror`).
    pub stopping_tracepoint: u64,
    /// `tframes`: frames in the buffer (display only; never checked against the frames).
    pub frames: Option<u64>,
    /// `tcreated`: frames created (more than `frames` with a circular buffer).
    pub created: Option<u64>,
    /// `tfree`: free bytes of the trace buffer.
    pub free: Option<u64>,
    /// `tsize`: size of the trace buffer.
    pub size: Option<u64>,
    /// `disconn`: disconnected tracing was on.
    pub disconnected: Option<u64>,
    /// `circular`: the trace buffer was circular.
    pub circular: Option<u64>,
    /// `starttime`: microseconds (gdbserver: since boot).
    pub start_time: Option<u64>,
    /// `stoptime`: microseconds.
    pub stop_time: Option<u64>,
    /// `notes`, hex-decoded.
    pub notes: Option<Vec<u8>>,
    /// `username`, hex-decoded.
    pub username: Option<Vec<u8>>,
    /// Keys GDB does not know, with their raw values, in file order (GDB skips them).
    pub unknown: Vec<(String, String)>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            running: false,
            stop_reason: StopReason::Unknown,
            stop_description: None,
            stopping_tracepoint: 0,
            frames: None,
            created: None,
            free: None,
            size: None,
            disconnected: None,
            circular: None,
            start_time: None,
            stop_time: None,
            notes: None,
            username: None,
            unknown: Vec::new(),
        }
    }
}

/// The kind of a `Z` source string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    /// `at`: the location as typed (`traceme`, `*0x401136`).
    At,
    /// `cond`: the condition as typed.
    Cond,
    /// `cmd`: one line of the CLI action list.
    Cmd,
    /// Anything else (GDB ignores it).
    Other(String),
}

impl SourceKind {
    /// The kind as written in the file.
    #[must_use]
    pub fn as_str(&self) -> &str {
        match self {
            SourceKind::At => "at",
            SourceKind::Cond => "cond",
            SourceKind::Cmd => "cmd",
            SourceKind::Other(s) => s,
        }
    }
}

/// A `Z` line: a source string of a tracepoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceString {
    /// What the text is.
    pub kind: SourceKind,
    /// The text, hex-decoded.
    pub text: Vec<u8>,
}

/// One `tp` tracepoint, merged from all its lines (same number and address).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tracepoint {
    /// The tracepoint number in the file (frames refer to it).
    pub number: u64,
    /// Its address.
    pub address: u64,
    /// Whether a `T` line defined it (otherwise only other pieces were seen).
    pub defined: bool,
    /// `E` (enabled) or `D`.
    pub enabled: bool,
    /// The while-stepping count.
    pub step_count: u64,
    /// The pass count (0 = none).
    pub pass_count: u64,
    /// `F<hex>`: a fast tracepoint (GDB always writes `F0`).
    pub fast: Option<u64>,
    /// `S`: a static tracepoint (GDB never writes it; the reader accepts it).
    pub is_static: bool,
    /// `X<len>,<hex>`: the condition as agent-expression bytes.
    pub condition: Option<Vec<u8>>,
    /// `A` lines: the action strings (`R…`, `M…`, `X…`, `L`), in order.
    pub actions: Vec<String>,
    /// `S` lines: the while-stepping action strings, in order.
    pub step_actions: Vec<String>,
    /// `Z` lines, in order (GDB writes `at`, `cond`, then each `cmd`).
    pub sources: Vec<SourceString>,
    /// `V` lines: (hit count, trace buffer usage in bytes), parsed as hex as GDB does
    /// (gdbserver writes decimal digits; see [`Tracepoint::hits_decimal`]).
    pub status: Vec<(u64, u64)>,
}

impl Tracepoint {
    /// The `Z at` location source.
    #[must_use]
    pub fn at(&self) -> Option<&[u8]> {
        self.sources
            .iter()
            .find(|s| s.kind == SourceKind::At)
            .map(|s| s.text.as_slice())
    }

    /// The `Z cond` condition source.
    #[must_use]
    pub fn cond_source(&self) -> Option<&[u8]> {
        self.sources
            .iter()
            .find(|s| s.kind == SourceKind::Cond)
            .map(|s| s.text.as_slice())
    }

    /// The `Z cmd` lines (the CLI action list).
    pub fn cmds(&self) -> impl Iterator<Item = &[u8]> {
        self.sources
            .iter()
            .filter(|s| s.kind == SourceKind::Cmd)
            .map(|s| s.text.as_slice())
    }

    /// Hit count as GDB shows it: the `V` values read as hex, summed.
    #[must_use]
    pub fn hits(&self) -> u64 {
        self.status
            .iter()
            .fold(0u64, |a, (h, _)| a.wrapping_add(*h))
    }

    /// Trace buffer usage as GDB shows it (hex reading, summed).
    #[must_use]
    pub fn usage(&self) -> u64 {
        self.status
            .iter()
            .fold(0u64, |a, (_, u)| a.wrapping_add(*u))
    }

    /// The hit count as gdbserver meant it: the hex digits of each `V` value read as
    /// decimal (gdbserver writes decimal, GDB reads hex). `None` if a value has digits a–f.
    #[must_use]
    pub fn hits_decimal(&self) -> Option<u64> {
        self.status
            .iter()
            .try_fold(0u64, |a, (h, _)| a.checked_add(hex_digits_as_decimal(*h)?))
    }

    /// The trace buffer usage as gdbserver meant it (see [`Tracepoint::hits_decimal`]).
    #[must_use]
    pub fn usage_decimal(&self) -> Option<u64> {
        self.status
            .iter()
            .try_fold(0u64, |a, (_, u)| a.checked_add(hex_digits_as_decimal(*u)?))
    }
}

/// Reads the hex digits of `v` as a decimal number (`0x1200` → 1200).
#[must_use]
pub fn hex_digits_as_decimal(v: u64) -> Option<u64> {
    let mut out = 0u64;
    let mut mul = 1u64;
    let mut v = v;
    while v != 0 {
        let d = v & 0xf;
        if d > 9 {
            return None;
        }
        out = out.checked_add(d.checked_mul(mul)?)?;
        v >>= 4;
        if v != 0 {
            mul = mul.checked_mul(10)?;
        }
    }
    Some(out)
}

/// A `tsv` line: a trace state variable definition.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TraceStateVariable {
    /// Its number (`V` blocks refer to it).
    pub number: u64,
    /// The initial value (written as 64-bit two's complement hex).
    pub initial: i64,
    /// Whether it is built in (gdbserver's `$trace_timestamp`).
    pub builtin: u64,
    /// The name without `$`, hex-decoded.
    pub name: Vec<u8>,
}

/// The description section, typed.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Description {
    /// The `R` line: bytes of a register block (hex in the file). `None` without `R` line.
    pub register_size: Option<u32>,
    /// The `tdesc` payloads, one per line, in order (joined with `\n` after each, they are the
    /// target description XML).
    pub tdesc_lines: Vec<String>,
    /// The `status` line (the last one wins).
    pub status: Option<Status>,
    /// The `tsv` lines, in file order.
    pub tsvs: Vec<TraceStateVariable>,
    /// The tracepoints, in order of first appearance (GDB writes them in reverse upload
    /// order, which is kept).
    pub tracepoints: Vec<Tracepoint>,
    /// Lines GDB ignores (unknown prefixes, unknown tp pieces), in order; written back just
    /// before the empty line.
    pub unknown_lines: Vec<String>,
}

impl Description {
    /// The target description XML: the `tdesc` payloads each followed by `\n`. `None` when
    /// there are no `tdesc` lines.
    #[must_use]
    pub fn tdesc_xml(&self) -> Option<String> {
        if self.tdesc_lines.is_empty() {
            return None;
        }
        let mut s = String::new();
        for l in &self.tdesc_lines {
            s.push_str(l);
            s.push('\n');
        }
        Some(s)
    }

    /// Sets the `tdesc` lines from a whole XML document (split at `\n`).
    pub fn set_tdesc_xml(&mut self, xml: &str) {
        let body = xml.strip_suffix('\n').unwrap_or(xml);
        self.tdesc_lines = body.split('\n').map(str::to_owned).collect();
    }

    /// The tracepoint with this file number (the first, if several addresses).
    #[must_use]
    pub fn tracepoint(&self, number: u64) -> Option<&Tracepoint> {
        self.tracepoints.iter().find(|t| t.number == number)
    }

    /// The trace state variable with this number.
    #[must_use]
    pub fn tsv(&self, number: u64) -> Option<&TraceStateVariable> {
        self.tsvs.iter().find(|t| t.number == number)
    }
}

/// A block of an owned frame (writer side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockData {
    /// `R`: register bytes (the writer checks the length against the `R` size).
    Registers(Vec<u8>),
    /// `M`: memory at an address (at most 65535 bytes).
    Memory {
        /// The start address.
        address: u64,
        /// The bytes.
        data: Vec<u8>,
    },
    /// `V`: a trace state variable's value.
    Tsv {
        /// The variable's number.
        number: i32,
        /// Its value.
        value: i64,
    },
}

/// An owned trace frame (writer side).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FrameData {
    /// The tracepoint number (must not be 0: 0 ends the frames).
    pub tracepoint: i16,
    /// The blocks, in order.
    pub blocks: Vec<BlockData>,
}

/// A whole trace file, owned: what [`crate::write`] serialises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceFileData {
    /// The description section.
    pub description: Description,
    /// The frames.
    pub frames: Vec<FrameData>,
    /// The bytes after the last frame, starting with the 2-byte zero that ends the frames:
    /// `tsave` writes 4 zero bytes ([`crate::raw::GDB_TERMINATOR`]), GDB's testsuite 6.
    /// It cannot be empty: GDB refuses frames that end without the terminator.
    pub end: Vec<u8>,
}

impl Default for TraceFileData {
    fn default() -> Self {
        TraceFileData {
            description: Description::default(),
            frames: Vec::new(),
            end: crate::raw::GDB_TERMINATOR.to_vec(),
        }
    }
}
