//! The client side of the daemon's socket: `gatehouse connect` (a first
//! line, then the bytes of an MCP session relayed between stdio and the
//! socket) and `gatehouse approvals --socket` (one operation).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use super::wire::{ApprovalOp, Hello, Narrow, Reply, VERSION};

/// Why the daemon could not be reached or answered nothing sensible.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected to.
    #[error("cannot connect to the daemon at `{path}`: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: crate::util::IoCause,
    },
    /// Reading or writing the socket failed.
    #[error("the daemon at `{path}`: {source}")]
    Io {
        /// The socket.
        path: PathBuf,
        /// Why.
        source: crate::util::IoCause,
    },
    /// The daemon's answer line is not one.
    #[error("the daemon at `{0}` answered something that is not a gatehouse reply")]
    BadReply(PathBuf),
}

/// A connection the daemon accepted: its reply (the actor, workspace and
/// level served) and the socket, ready for MCP's bytes.
pub struct Connected {
    /// The daemon's reply.
    pub reply: Reply,
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    path: PathBuf,
}

/// Says `hello` on the socket at `path`; the reply and the socket.
fn hello(path: &Path, hello: &Hello) -> Result<(Reply, BufReader<UnixStream>), ClientError> {
    let io = |e: std::io::Error| ClientError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    };
    let mut stream = UnixStream::connect(path).map_err(|e| ClientError::Connect {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    let mut line = serde_json::to_vec(hello).map_err(|e| io(std::io::Error::other(e)))?;
    line.push(b'\n');
    stream.write_all(&line).map_err(io)?;
    let mut reader = BufReader::new(stream);
    let mut answer = Vec::new();
    reader.read_until(b'\n', &mut answer).map_err(io)?;
    let reply: Reply =
        serde_json::from_slice(&answer).map_err(|_| ClientError::BadReply(path.to_path_buf()))?;
    Ok((reply, reader))
}

/// Connects to the daemon at `path` asking to be served, narrowed by
/// `narrow`; the daemon's reply, which may be a refusal.
pub fn connect(path: &Path, narrow: Narrow) -> Result<Connected, ClientError> {
    let (reply, reader) = hello(
        path,
        &Hello {
            gatehouse: VERSION,
            connect: Some(narrow),
            approvals: None,
        },
    )?;
    let writer = reader.get_ref().try_clone().map_err(|e| ClientError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    Ok(Connected {
        reply,
        reader,
        writer,
        path: path.to_path_buf(),
    })
}

/// One approval operation on the daemon at `path`: its reply.
pub fn ask(path: &Path, op: ApprovalOp) -> Result<Reply, ClientError> {
    hello(
        path,
        &Hello {
            gatehouse: VERSION,
            connect: None,
            approvals: Some(op),
        },
    )
    .map(|(reply, _)| reply)
}

/// Relays an accepted connection: `input` to the daemon (its end closes
/// the session's input), the daemon's bytes to `output`, each read
/// written and flushed at once, until the daemon closes the connection.
pub fn relay(
    connected: Connected,
    mut input: impl Read + Send + 'static,
    mut output: impl Write,
) -> Result<(), ClientError> {
    let Connected {
        mut reader,
        mut writer,
        path,
        ..
    } = connected;
    let io = |e: std::io::Error| ClientError::Io {
        path: path.clone(),
        source: e.into(),
    };
    std::thread::Builder::new()
        .name("gatehouse-connect-in".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match input.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        if writer.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
            let _ = writer.shutdown(std::net::Shutdown::Write);
        })
        .map_err(io)?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        output.write_all(&buf[..n]).map_err(io)?;
        output.flush().map_err(io)?;
    }
}
