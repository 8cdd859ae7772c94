//! Digests and bounded decompression.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::error::RepositoryError;

/// The sha256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Decompresses gzip, refusing output beyond `limit` bytes (a gzip bomb is an error, not an
/// exhausted memory).
pub fn gunzip(bytes: &[u8], limit: u64, what: &str) -> Result<Vec<u8>, RepositoryError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| RepositoryError::BadGzip { what: what.to_string(), message: e.to_string() })?;
    if out.len() as u64 > limit {
        return Err(RepositoryError::TooLarge { what: format!("{what} (decompressed)"), limit });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn gunzip_is_bounded() {
        assert_eq!(gunzip(&gzip(b"hello"), 5, "x").unwrap(), b"hello");
        let bomb = gzip(&vec![0u8; 10 << 20]);
        assert!(bomb.len() < 20_000);
        let err = gunzip(&bomb, 1 << 20, "components").unwrap_err().to_string();
        assert_eq!(err, "components (decompressed) is larger than the limit of 1048576 bytes");
        assert!(gunzip(b"not gzip", 10, "c").unwrap_err().to_string().starts_with("c is not valid gzip"));
    }

    #[test]
    fn sha256_of_empty_input() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
