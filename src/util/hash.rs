//! The sha256 of a file's content, the one streaming digest of gatehouse.
//!
//! Read in blocks, never the whole file in memory: components can be tens
//! of megabytes and a journaled file up to the turn's journal cap. (The
//! digest of bytes already in memory is the policy core's `sha256_hex`.)

use std::io::Read;
use std::ops::ControlFlow;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The bytes read at once: large enough that a big file costs few
/// `read(2)` calls.
const BLOCK: usize = 64 * 1024;

/// The lowercase hex sha256 of everything `input` yields, each block
/// also handed to `each` as it is read (for a caller that copies while
/// it hashes); `None` when `each` stopped the reading early.
pub fn sha256_each(
    mut input: impl Read,
    mut each: impl FnMut(&[u8]) -> std::io::Result<ControlFlow<()>>,
) -> std::io::Result<Option<String>> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; BLOCK];
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            break;
        }
        if each(&buf[..n])?.is_break() {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
    }
    Ok(Some(hex(&hasher.finalize())))
}

/// `bytes` in lowercase hex (a digest's usual form), without the
/// formatter's per-byte calls.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The lowercase hex sha256 of everything `input` yields.
pub fn sha256_reader(input: impl Read) -> std::io::Result<String> {
    // Nothing stops the reading, so there is always a digest.
    sha256_each(input, |_| Ok(ControlFlow::Continue(()))).map(Option::unwrap_or_default)
}

/// The lowercase hex sha256 of the file at `path` (links followed).
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    sha256_reader(std::fs::File::open(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_hashes_as_its_bytes_do() {
        const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_reader(&b"abc"[..]).unwrap(), ABC);
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        // Longer than a block, so the loop runs more than once.
        let big = vec![7u8; BLOCK * 2 + 3];
        std::fs::write(&f, &big).unwrap();
        assert_eq!(
            sha256_file(&f).unwrap(),
            format!("{:x}", Sha256::digest(&big))
        );
        assert!(sha256_file(&dir.path().join("none")).is_err());
    }

    #[test]
    fn each_block_is_seen_and_may_stop_the_reading() {
        let big = vec![1u8; BLOCK + 1];
        let mut seen = 0;
        let whole = sha256_each(&big[..], |b| {
            seen += b.len();
            Ok(ControlFlow::Continue(()))
        })
        .unwrap();
        assert_eq!(seen, big.len());
        assert_eq!(whole, Some(format!("{:x}", Sha256::digest(&big))));
        let stopped = sha256_each(&big[..], |_| Ok(ControlFlow::Break(()))).unwrap();
        assert_eq!(stopped, None);
    }
}
