//! The controlling terminal: the one place gatehouse opens `/dev/tty`,
//! shows text a guest or a client supplied, and reads a person's answer.
//!
//! Prompts go to `/dev/tty` and answers come from it, never through the
//! process's stdin or stdout (those may be a command's input and output,
//! or a protocol stream). Every string that did not come from gatehouse
//! itself is shown through [`shown`]: control and bidirectional formatting
//! characters escaped, newlines included, so a question cannot forge a
//! line of gatehouse's own output or drive the terminal. An answer is
//! waited for no longer than the caller's deadline.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use crate::policy::DenyCode;
use crate::sandbox::Asker;

pub use crate::util::printable as shown;

/// Text a terminal shows of one answer or question, at most.
pub const MAX_LINE: usize = 4_096;

/// The controlling terminal, opened for reading and writing.
pub struct Tty {
    file: File,
}

impl Tty {
    /// The controlling terminal, when the process has one that opens.
    ///
    /// # Security
    /// Whoever holds it can ask the person at the terminal anything; the
    /// callers show what they ask through [`shown`].
    pub fn open() -> Option<Tty> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()
            .map(|file| Tty { file })
    }

    /// [`Tty::open`] when stderr is a terminal too: a process whose
    /// output goes to a file or a pipe is not run by someone watching it,
    /// and asks no one.
    pub fn interactive() -> Option<Tty> {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            Tty::open()
        } else {
            None
        }
    }

    /// Writes `text` as it is (gatehouse's own words; show anything else
    /// through [`shown`] first).
    pub fn say(&mut self, text: &str) {
        // A terminal that cannot be written to shows nothing; the answer,
        // read next, decides.
        let _ = self.file.write_all(text.as_bytes());
        let _ = self.file.flush();
    }

    /// One line typed at the terminal, without its line end. `Ok(None)`
    /// at the end of input (the terminal closed, `^D`), `Err(TimedOut)`
    /// when nothing complete was typed before `until`.
    pub fn read_line(&mut self, until: Option<Instant>) -> std::io::Result<Option<String>> {
        let mut line = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            if let Some(until) = until {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() || !self.readable(left)? {
                    return Err(std::io::ErrorKind::TimedOut.into());
                }
            }
            let n = match self.file.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                return Ok((!line.is_empty()).then(|| text_of(&line)));
            }
            for &b in &buf[..n] {
                if b == b'\n' {
                    return Ok(Some(text_of(&line)));
                }
                if line.len() < MAX_LINE {
                    line.push(b);
                }
            }
        }
    }

    /// Whether input arrives within `left`.
    fn readable(&self, left: Duration) -> std::io::Result<bool> {
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX).max(1);
        let mut fds = [libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        loop {
            // SAFETY: `fds` is a valid array of one `pollfd` that outlives
            // the call, and its length is passed with it.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), 1, ms) };
            match r {
                0 => return Ok(false),
                r if r > 0 => return Ok(true),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }
}

fn text_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .trim_end_matches('\r')
        .to_string()
}

/// The asker of a run started from a terminal: [`TerminalAsker`] when
/// someone is at one ([`Tty::interactive`]), else nobody.
pub fn asker() -> Option<crate::sandbox::AskerRef> {
    Tty::interactive().map(|_| crate::sandbox::AskerRef(std::sync::Arc::new(TerminalAsker)))
}

/// `human:ask` at the controlling terminal: the question shown on one
/// line (escaped), the answer read from the terminal and waited for no
/// longer than what is left of the run.
pub struct TerminalAsker;

impl Asker for TerminalAsker {
    fn ask(&self, question: &str, left: Duration) -> Result<String, (DenyCode, String)> {
        let Some(mut tty) = Tty::open() else {
            return Err((
                DenyCode::ApprovalRequired,
                "there is no terminal to ask the question on".into(),
            ));
        };
        tty.say(&format!("\nthe executor asks: {}\n> ", shown(question)));
        match tty.read_line(Some(Instant::now() + left)) {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => Err((
                DenyCode::ApprovalRequired,
                "the terminal closed before an answer was typed".into(),
            )),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                tty.say("\n(no answer before the run's deadline)\n");
                Err((
                    DenyCode::LimitDeadline,
                    "no answer was typed before the run's deadline".into(),
                ))
            }
            Err(e) => Err((
                DenyCode::ApprovalRequired,
                format!(
                    "cannot read the answer: {}",
                    crate::util::lower(&e.to_string())
                ),
            )),
        }
    }
}
