//! Real GDB in the tests: files recorded on this machine with gdb + gdbserver are read by
//! us and compared with what gdb prints for the same file; files from our writer are opened
//! by gdb, which must report the same status, frames and values.

use std::time::Instant;

use gdb_tfile::{
    BlockData, Error, FrameData, FrameIndex, ReadOptions, StopReason, StreamReader, TraceFile,
    TraceFileData, write,
};

use super::gdb::{self, GdbFrame};

fn tp_of(file: &TraceFile<'_>, at: &[u8]) -> i16 {
    let t = file
        .description()
        .tracepoints
        .iter()
        .find(|t| t.at() == Some(at))
        .unwrap();
    i16::try_from(t.number).unwrap()
}

/// Our view of every frame, in the shape of [`GdbFrame`].
fn our_frames(file: &TraceFile<'_>, mem_tp: i16, mem_addr: u64) -> Vec<GdbFrame> {
    let td = file.tdesc().expect("the file has a target description");
    file.frames()
        .map(|f| {
            let f = f.unwrap();
            let rip = f.register(td, "rip").unwrap().and_then(|v| v.as_u64());
            let (mem, hits) = if f.tracepoint == mem_tp {
                let m = f.memory(mem_addr, 4).unwrap();
                let m: Vec<u8> = m.into_iter().map(Option::unwrap).collect();
                let hits = f
                    .tsvs()
                    .unwrap()
                    .iter()
                    .find(|(n, _)| *n == 2)
                    .map(|(_, v)| *v);
                (
                    Some(i64::from(i32::from_le_bytes(m.try_into().unwrap()))),
                    hits,
                )
            } else {
                (None, None)
            };
            GdbFrame {
                index: f.index,
                tracepoint: i64::from(f.tracepoint),
                rip,
                mem,
                hits,
            }
        })
        .collect()
}

#[test]
fn real_file_reads_like_gdb_and_round_trips() {
    if !gdb::available("real_file_reads_like_gdb_and_round_trips") {
        return;
    }
    let rec = gdb::recording();
    let bytes = std::fs::read(&rec.tfile).unwrap();
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let d = file.description();

    // Byte-exact round trip of a file GDB wrote.
    let again = write::to_bytes(&file.to_data().unwrap(), file.layout().endian).unwrap();
    assert!(
        again == bytes,
        "read + write changed the bytes of {}",
        rec.tfile.display()
    );

    // The description: what the recording script asked for.
    let st = d.status.as_ref().unwrap();
    assert_eq!(st.stop_reason, StopReason::Stop);
    assert_eq!(st.stop_description.as_deref(), Some(&b"done-tracing"[..]));
    assert_eq!(st.username.as_deref(), Some(&b"alice"[..]));
    assert_eq!(st.notes.as_deref(), Some(&b"first-notes"[..]));
    assert_eq!(st.size, Some(67_108_864));
    let neg = d.tsvs.iter().find(|t| t.name == b"neg").unwrap();
    assert_eq!(neg.initial, -5);
    let traceme = d
        .tracepoints
        .iter()
        .find(|t| t.at() == Some(b"traceme"))
        .unwrap();
    // The tracepoint sits after traceme's prologue.
    assert!((rec.traceme..rec.traceme + 32).contains(&traceme.address));
    assert_eq!(traceme.hits_decimal(), Some(gdb::ITERATIONS));
    let cond = d
        .tracepoints
        .iter()
        .find(|t| t.at() == Some(b"cond_fn"))
        .unwrap();
    assert_eq!(cond.step_count, 3);
    assert!(cond.condition.is_some() && !cond.step_actions.is_empty());
    assert_eq!(cond.cond_source(), Some(&b"i % 500 == 7"[..]));
    // GDB writes tracepoints in reverse order: cond_fn (defined last) comes first.
    assert!(d.tracepoints[0].at() == Some(b"cond_fn"));
    // The register layout adds up to the R size.
    let td = file.tdesc().unwrap();
    assert_eq!(td.architecture.as_deref(), Some("i386:x86-64"));
    assert_eq!(td.check_size(d.register_size.unwrap()), Ok(()));

    // Frames: as many as the status says, at least 1000.
    let n = file.frames().count() as u64;
    assert!(n >= 1000, "only {n} frames");
    assert_eq!(st.frames, Some(n));
    let tp = tp_of(&file, b"traceme");
    let ours = our_frames(&file, tp, rec.testglob);
    // Independent check (from the C source): at the k-th call of traceme, testglob still
    // holds the previous call's 3 * (k - 1), and $hits was incremented before collection.
    let mut k = 0i64;
    for f in ours.iter().filter(|f| f.tracepoint == i64::from(tp)) {
        assert_eq!(
            f.mem,
            Some(if k == 0 { 0 } else { 3 * (k - 1) }),
            "frame {}",
            f.index
        );
        assert_eq!(f.hits, Some(k + 1));
        assert_eq!(f.rip, Some(traceme.address));
        k += 1;
    }
    assert_eq!(k as u64, gdb::ITERATIONS);

    // And GDB agrees, frame by frame.
    let t = Instant::now();
    let (status, theirs) = gdb::gdb_frames(&rec.dir, &rec.tfile, i64::from(tp), rec.testglob);
    eprintln!(
        "gdb visited {} frames with a tfind loop in {:?}",
        theirs.len(),
        t.elapsed()
    );
    assert_eq!(
        gdb::number_after(&status, "Collected "),
        Some(n),
        "{status}"
    );
    assert!(
        status.contains("Trace stopped by a tstop command (done-tracing)."),
        "{status}"
    );
    assert!(status.contains("Trace user is alice."), "{status}");
    assert_eq!(
        gdb::number_after(&status, "Trace buffer has "),
        st.free,
        "{status}"
    );
    assert_eq!(theirs.len(), ours.len());
    for (a, b) in ours.iter().zip(&theirs) {
        assert_eq!(a, b);
    }

    // The index answers tfind lookups like GDB would.
    let idx = FrameIndex::new(&file).unwrap();
    assert_eq!(idx.len() as u64, n);
    let first_cond = ours
        .iter()
        .position(|f| f.tracepoint != i64::from(tp))
        .unwrap();
    assert_eq!(
        idx.find_tracepoint(tp_of(&file, b"cond_fn"), 0),
        Some(first_cond)
    );
    let second_traceme = 1 + ours[1..]
        .iter()
        .position(|f| f.tracepoint == i64::from(tp))
        .unwrap();
    assert_eq!(idx.find_pc(traceme.address, 1), Some(second_traceme));
    assert_eq!(idx.find_memory(rec.testglob, 4, 0), Some(0));
}

/// A file made by our writer from scratch (with the real file's target description) is
/// read by GDB with the same status, frames, registers, memory and TSV values.
#[test]
fn gdb_reads_files_we_write() {
    if !gdb::available("gdb_reads_files_we_write") {
        return;
    }
    let rec = gdb::recording();
    let bytes = std::fs::read(&rec.tfile).unwrap();
    let real = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let td = real.tdesc().unwrap();
    let rip = td.register("rip").unwrap().offset;
    let rsize = real.description().register_size.unwrap() as usize;
    let tp = tp_of(&real, b"traceme");
    let mut description = real.description().clone();
    let frames: Vec<FrameData> = (0..300i64)
        .map(|i| {
            let mut regs = vec![0u8; rsize];
            let pc = 0x40_1000 + i as u64 * 0x10;
            regs[rip..rip + 8].copy_from_slice(&pc.to_le_bytes());
            let mut blocks = vec![BlockData::Registers(regs)];
            if i % 3 != 2 {
                blocks.push(BlockData::Memory {
                    address: rec.testglob,
                    data: ((i * 7) as i32).to_le_bytes().to_vec(),
                });
                blocks.push(BlockData::Tsv {
                    number: 2,
                    value: i * 11,
                });
            }
            FrameData {
                tracepoint: if i % 3 == 2 { tp + 1 } else { tp },
                blocks,
            }
        })
        .collect();
    let st = description.status.as_mut().unwrap();
    st.frames = Some(frames.len() as u64);
    st.created = Some(frames.len() as u64);
    st.free = Some(0x1234);
    st.stop_description = Some(b"written-by-us".to_vec());
    st.username = Some(b"bob".to_vec());
    let data = TraceFileData {
        description,
        frames,
        end: vec![0; 4],
    };
    let ours = write::to_bytes(&data, gdb_tfile::Endian::Little).unwrap();
    let path = rec.dir.join("ours.tf");
    std::fs::write(&path, &ours).unwrap();

    let (status, theirs) = gdb::gdb_frames(&rec.dir, &path, i64::from(tp), rec.testglob);
    assert_eq!(
        gdb::number_after(&status, "Collected "),
        Some(300),
        "{status}"
    );
    assert!(status.contains("(written-by-us)"), "{status}");
    assert!(status.contains("Trace user is bob."), "{status}");
    assert_eq!(
        gdb::number_after(&status, "Trace buffer has "),
        Some(0x1234)
    );
    assert_eq!(theirs.len(), 300);
    for (i, f) in theirs.iter().enumerate() {
        let i = i as i64;
        let expect_tp = if i % 3 == 2 { tp + 1 } else { tp };
        assert_eq!(f.index as i64, i);
        assert_eq!(f.tracepoint, i64::from(expect_tp));
        assert_eq!(f.rip, Some(0x40_1000 + i as u64 * 0x10));
        if i % 3 != 2 {
            assert_eq!(f.mem, Some(i * 7));
            assert_eq!(f.hits, Some(i * 11));
        }
    }
    // And we read our own file back the same way.
    let back = TraceFile::parse(&ours, ReadOptions::default()).unwrap();
    assert_eq!(back.to_data().unwrap(), data);
}

/// `tdump` of a frame (with the executable loaded, so GDB recreates the tracepoints and
/// knows the variables): every register GDB prints as a plain hex value, `testglob` and
/// `$hits` equal what we read.
#[test]
fn tdump_matches_our_frame() {
    if !gdb::available("tdump_matches_our_frame") {
        return;
    }
    let rec = gdb::recording();
    let bytes = std::fs::read(&rec.tfile).unwrap();
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let td = file.tdesc().unwrap();
    let tp = tp_of(&file, b"traceme");
    // The 11th frame of traceme.
    let frame = file
        .frames()
        .map(Result::unwrap)
        .filter(|f| f.tracepoint == tp)
        .nth(10)
        .unwrap();
    let script = format!(
        "set pagination off\nset confirm off\nfile ./tracee\ntarget tfile {}\ntfind {}\ntdump\n",
        rec.tfile.display(),
        frame.index
    );
    let out = gdb::gdb_batch(&rec.dir, &script);
    assert!(
        out.contains(&format!("trace frame {}:", frame.index)),
        "{out}"
    );
    let mut checked = 0;
    for line in out.lines() {
        let mut w = line.split_whitespace();
        let (Some(name), Some(value)) = (w.next(), w.next()) else {
            continue;
        };
        if let (Some(reg), Some(hex)) = (td.register(name), value.strip_prefix("0x")) {
            let ours = frame.register(td, &reg.name).unwrap().unwrap();
            assert_eq!(
                ours.as_u64(),
                Some(u64::from_str_radix(hex, 16).unwrap()),
                "{line}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 24, "only {checked} registers compared:\n{out}");
    assert!(td.register("rip").is_some());
    let glob: Vec<u8> = frame
        .memory(rec.testglob, 4)
        .unwrap()
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let glob = i32::from_le_bytes(glob.try_into().unwrap());
    assert_eq!(
        glob,
        3 * 9,
        "independently: testglob = 3 * (k - 1) at the k-th call"
    );
    assert!(out.contains(&format!("testglob = {glob}\n")), "{out}");
    let hits = frame
        .tsvs()
        .unwrap()
        .iter()
        .find(|(n, _)| *n == 2)
        .unwrap()
        .1;
    assert!(out.contains(&format!("$hits = {hits}\n")), "{out}");
}

/// GDB's own testsuite files, rebuilt by our writer from the notes, read by GDB with what
/// `gdb.trace/tfile.exp` expects (each file in a fresh GDB: switching tfile targets in one
/// session carries stale state over).
#[test]
fn gdb_reads_the_rebuilt_testsuite_files() {
    if !gdb::available("gdb_reads_the_rebuilt_testsuite_files") {
        return;
    }
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/gdb-tfile");
    let basic = gdb::gdb_batch(
        &dir,
        "set pagination off\ntarget tfile tfile-basic.tf\ntstatus\ntfind 0\nprintf \"V %d %d\\n\", *(int *) 0x40402c, *(int *) 0x404030\ntfind\n",
    );
    for expected in [
        "Trace stopped by a tstop command.",
        "Collected 1 trace frame",
        "Trace buffer has 256 bytes of 4096 bytes free (93% full).",
        "Found trace frame 0, tracepoint 1",
        "V 31415 271828",
        "No trace frame found",
    ] {
        assert!(
            basic.contains(expected),
            "missing {expected:?} in:\n{basic}"
        );
    }
    let error = gdb::gdb_batch(
        &dir,
        "set pagination off\ntarget tfile tfile-error.tf\ntstatus\n",
    );
    for expected in [
        "warning: No traceframes present in this file.",
        "Trace stopped by an error (made-up error, tracepoint 1).",
        "Collected 0 trace frame",
    ] {
        assert!(
            error.contains(expected),
            "missing {expected:?} in:\n{error}"
        );
    }
}

/// A fast tracepoint file (`F0`, `tstop::0`, `notes:;username:`, hit count 0 in `V`): read,
/// round-tripped and compared with GDB frame by frame.
#[test]
fn fast_tracepoint_file() {
    if !gdb::available("fast_tracepoint_file") {
        return;
    }
    let Some(rec) = gdb::fast_recording() else {
        return;
    };
    let bytes = std::fs::read(&rec.tfile).unwrap();
    let file = TraceFile::parse(&bytes, ReadOptions::default()).unwrap();
    let data = match file.to_data() {
        Ok(data) => data,
        Err(ours) => return gdb_refuses_the_same_block(&rec, &ours),
    };
    let again = write::to_bytes(&data, file.layout().endian).unwrap();
    assert!(again == bytes, "read + write changed the bytes");
    let d = file.description();
    let tp = &d.tracepoints[0];
    assert_eq!(tp.fast, Some(0), "GDB always writes F0");
    assert_eq!(tp.address, rec.traceme);
    let st = d.status.as_ref().unwrap();
    assert_eq!(st.stop_description.as_deref(), Some(&b""[..]), "tstop::0");
    assert_eq!(st.username.as_deref(), Some(&b""[..]));
    let number = i16::try_from(tp.number).unwrap();
    let ours = our_frames_no_hits(&file, number, rec.testglob);
    assert_eq!(ours.len(), 100);
    for (k, f) in ours.iter().enumerate() {
        // Independent: at the k-th call, fcount_g has been incremented k times.
        assert_eq!(f.mem, Some(k as i64));
        assert_eq!(f.rip, Some(rec.traceme));
    }
    // GDB quirk: without the executable, recreating a tracepoint from `Z at:*fast_site`
    // is an error that aborts `target tfile`, so gdb loads the executable, and then
    // renumbers the one tracepoint it recreates as 1.
    let (_, theirs) = gdb::gdb_frames_with(&rec.dir, &rec.tfile, 1, rec.testglob, false, true);
    let ours: Vec<GdbFrame> = ours
        .into_iter()
        .map(|f| GdbFrame { tracepoint: 1, ..f })
        .collect();
    assert_eq!(ours, theirs);
}

/// On some machines gdbserver's in-process agent writes register blocks of another size than
/// the file's `R` line (seen: 2500-byte blocks under `R 334`, which is 820 bytes), so the walk
/// past one lands mid-data. GDB walks a frame's blocks by the same rule, so it must find the
/// frame and then refuse it with the same type byte; anything else is a disagreement with GDB.
fn gdb_refuses_the_same_block(rec: &gdb::Recording, ours: &Error) {
    let Error::UnknownBlock { frame, code, .. } = *ours else {
        panic!("the fast tracepoint file does not read: {ours}");
    };
    let script = format!(
        "set pagination off\nfile ./tracee\ntarget tfile {}\ntfind {frame}\ntdump\n",
        rec.tfile.display()
    );
    let theirs = gdb::gdb_batch(&rec.dir, &script);
    // GDB prints the type byte raw: a NUL ends its message there.
    let expected = match code {
        0 => "Unknown block type '".to_string(),
        _ => format!(
            "Unknown block type '{}' ({code:#x}) in trace frame",
            code as char
        ),
    };
    assert!(
        theirs.contains(&format!("Found trace frame {frame}, ")) && theirs.contains(&expected),
        "we refuse frame {frame} ({ours}), GDB does not find that frame and say {expected:?}:\n{theirs}"
    );
    eprintln!(
        "fast_tracepoint_file: gdbserver wrote a frame neither GDB nor we can read on this \
         machine (both: block type {code:#04x} in frame {frame}); the comparison of values is skipped"
    );
}

fn our_frames_no_hits(file: &TraceFile<'_>, tp: i16, addr: u64) -> Vec<GdbFrame> {
    our_frames(file, tp, addr)
        .into_iter()
        .map(|mut f| {
            f.hits = None;
            f
        })
        .collect()
}

/// A GDB-made file with its terminator cut off: GDB opens it, finds the last frame, and
/// fails with "Premature end of file while reading trace file" as soon as it scans past it;
/// both our readers yield the same frames, then fail where the terminator should be.
#[test]
fn missing_terminator_fails_like_gdb() {
    if !gdb::available("missing_terminator_fails_like_gdb") {
        return;
    }
    let rec = gdb::recording();
    let bytes = std::fs::read(&rec.tfile).unwrap();
    // tsave ends the frames with 4 zero bytes.
    assert_eq!(&bytes[bytes.len() - 4..], &[0; 4]);
    let cut = &bytes[..bytes.len() - 4];
    let path = rec.dir.join("no-terminator.tf");
    std::fs::write(&path, cut).unwrap();

    let file = TraceFile::parse(cut, ReadOptions::default()).unwrap();
    let results: Vec<_> = file.frames().collect();
    let n = results.len() - 1;
    assert!(n >= 1000, "only {n} frames");
    assert!(results[..n].iter().all(Result::is_ok));
    let err = results[n].as_ref().unwrap_err();
    assert!(
        matches!(err, Error::MissingTerminator { offset, frames } if offset.0 == cut.len() as u64 && *frames == n as u64),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with(&format!("at offset {:#x}", cut.len())),
        "{err}"
    );
    let mut stream = StreamReader::from_reader(cut, ReadOptions::default()).unwrap();
    let mut streamed = 0;
    let stream_err = loop {
        match stream.next_frame() {
            Ok(Some(_)) => streamed += 1,
            Ok(None) => panic!("the stream reader accepted a file without terminator"),
            Err(e) => break e,
        }
    };
    assert_eq!(streamed, n);
    assert_eq!(stream_err.to_string(), err.to_string());

    // GDB: frame n - 1 (the last complete one) is found; looking for frame n reads past it
    // and fails. The same file with its terminator just has no frame n. (An error ends a
    // gdb script, so the failing command comes last.)
    let script = |p: &std::path::Path| {
        format!(
            "set pagination off\nset confirm off\ntarget tfile {}\ntfind {}\ntfind {n}\n",
            p.display(),
            n - 1
        )
    };
    let out = gdb::gdb_batch(&rec.dir, &script(&path));
    assert!(
        out.contains(&format!("Found trace frame {}, tracepoint", n - 1)),
        "{out}"
    );
    assert!(
        out.contains("Premature end of file while reading trace file"),
        "{out}"
    );
    let intact = gdb::gdb_batch(&rec.dir, &script(&rec.tfile));
    assert!(intact.contains("No trace frame found"), "{intact}");
    assert!(!intact.contains("Premature end of file"), "{intact}");
}
