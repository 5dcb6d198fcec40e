//! What stands between GDB and `gdbstub`: the packets it would end the session on are
//! answered here, so that a session survives them (as gdbserver's does).
//!
//! - a packet longer than the buffer ([`super::PACKET_SIZE`]) is dropped and answered
//!   `E01` (gdbstub ends the session at one);
//! - bytes outside a packet other than `+` and Ctrl-C are dropped, and so is a NACK `-`
//!   (gdbstub ends the session at either; the stream is a pipe or TCP, which do not corrupt
//!   bytes, so there is nothing to send again);
//! - a packet's checksum is not checked (as gdbserver does not in no-ack mode): a wrong one
//!   is rewritten before gdbstub sees it;
//! - `vKill` is answered `OK` here and ends the session (without extended mode, gdbstub
//!   ends it without a reply, and GDB then reports a lost connection).
//!
//! What is left, a packet gdbstub knows but cannot parse (`m` with bad hex), ends
//! the `gdbstub` run; `gdbserver`'s `serve` answers it `E01` and starts a new run on the same
//! connection and replay ([`Shared`]).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;

use gdbstub::conn::{Connection, ConnectionExt};

/// The connection under the guard.
pub type Inner = Box<dyn ConnectionExt<Error = io::Error>>;

/// A connection whose packets are checked before `gdbstub` reads them.
pub struct Guard {
    inner: Inner,
    /// The bytes of the packet being handed to gdbstub.
    ready: VecDeque<u8>,
    /// The longest packet body passed on.
    max_body: usize,
    /// Whether GDB still expects `+` after each packet (until `QStartNoAckMode`).
    acks: bool,
    /// `vKill` answered: the session ends.
    ended: bool,
    /// Packets answered here (tests).
    answered: u64,
}

impl Guard {
    /// A guard over `inner` passing on packets of at most `packet_size` bytes in all.
    pub fn new(inner: Inner, packet_size: usize) -> Guard {
        Guard {
            inner,
            ready: VecDeque::new(),
            max_body: packet_size.saturating_sub(4),
            acks: true,
            ended: false,
            answered: 0,
        }
    }

    /// How many packets were answered here rather than by gdbstub.
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// Writes `body` as a reply packet (after a `+` while GDB wants acks).
    pub fn reply(&mut self, body: &str) -> io::Result<()> {
        let sum = body.bytes().fold(0u8, u8::wrapping_add);
        if self.acks {
            self.inner.write(b'+')?;
        }
        self.inner
            .write_all(format!("${body}#{sum:02x}").as_bytes())?;
        self.inner.flush()?;
        self.answered = self.answered.saturating_add(1);
        Ok(())
    }

    /// Reads from GDB until a packet or a byte to pass on is ready.
    fn fill(&mut self) -> io::Result<()> {
        while self.ready.is_empty() {
            if self.ended {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            match self.inner.read()? {
                b'$' => self.packet()?,
                b @ (b'+' | 0x03) => self.ready.push_back(b),
                // A NACK, or noise between packets.
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads one packet after its `$`.
    fn packet(&mut self) -> io::Result<()> {
        let mut body = Vec::new();
        let mut long = false;
        loop {
            match self.inner.read()? {
                b'#' => break,
                b => {
                    if body.len() < self.max_body {
                        body.push(b);
                    } else {
                        long = true;
                    }
                }
            }
        }
        // The checksum's two digits, not checked.
        self.inner.read()?;
        self.inner.read()?;
        if long {
            return self.reply("E01");
        }
        if body.starts_with(b"vKill") {
            self.reply("OK")?;
            self.ended = true;
            return Ok(());
        }
        if body == b"QStartNoAckMode" {
            // Its `OK` is the last reply GDB acks.
            self.acks = false;
        }
        let sum = body.iter().fold(0u8, |s, &b| s.wrapping_add(b));
        self.ready.push_back(b'$');
        self.ready.extend(&body);
        self.ready.push_back(b'#');
        self.ready.extend(format!("{sum:02x}").bytes());
        Ok(())
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("ready", &self.ready.len())
            .field("acks", &self.acks)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl Connection for Guard {
    type Error = io::Error;

    fn write(&mut self, byte: u8) -> io::Result<()> {
        self.inner.write(byte)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.inner.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl ConnectionExt for Guard {
    fn read(&mut self) -> io::Result<u8> {
        self.fill()?;
        self.ready
            .pop_front()
            .ok_or_else(|| io::ErrorKind::UnexpectedEof.into())
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        // Only a running target peeks (for Ctrl-C), and a replay stops at once.
        Ok(self.ready.front().copied())
    }
}

/// The guard shared by the `gdbstub` runs of one session.
#[derive(Clone, Debug)]
pub struct Shared(pub Rc<RefCell<Guard>>);

impl Connection for Shared {
    type Error = io::Error;

    fn write(&mut self, byte: u8) -> io::Result<()> {
        self.0.borrow_mut().write(byte)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.borrow_mut().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Connection::flush(&mut *self.0.borrow_mut())
    }
}

impl ConnectionExt for Shared {
    fn read(&mut self) -> io::Result<u8> {
        self.0.borrow_mut().read()
    }

    fn peek(&mut self) -> io::Result<Option<u8>> {
        self.0.borrow_mut().peek()
    }
}
