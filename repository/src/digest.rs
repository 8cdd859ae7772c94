//! Digests and bounded decompression.

use std::io::Read;

use sha2::{Digest, Sha256};

use crate::error::RepositoryError;

/// The sha256 of `bytes`, as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 (lowercase hex) of `value` as compact JSON, hashed as it is written: a
/// release's whole set of objects is megabytes of text that never needs to exist at once.
pub fn sha256_json_hex(value: &impl serde::Serialize) -> String {
    struct Hashing(Sha256);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hashing = Hashing(Sha256::new());
    serde_json::to_writer(&mut hashing, value).expect("JSON values serialize");
    hashing.0.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Decompresses gzip, every member of it as Go's reader (so clusterctl) does, refusing output
/// beyond `limit` bytes (a gzip bomb is an error, not an exhausted memory).
pub fn gunzip(bytes: &[u8], limit: u64, what: &str) -> Result<Vec<u8>, RepositoryError> {
    let mut out = Vec::with_capacity(expected_size(bytes, limit));
    flate2::read::MultiGzDecoder::new(bytes)
        .take(limit + 1)
        .read_to_end(&mut out)
        .map_err(|e| RepositoryError::BadGzip { what: what.to_string(), message: e.to_string() })?;
    if out.len() as u64 > limit {
        return Err(RepositoryError::TooLarge { what: format!("{what} (decompressed)"), limit });
    }
    // Only when the trailer undersold the text (several members, or a forged size).
    out.shrink_to_fit();
    Ok(out)
}

/// The size the gzip trailer gives (of the last member, modulo 4 GiB), within what deflate
/// can expand `bytes` to and within `limit`. Reading into exactly that room, a release of
/// megabytes is never held twice: grown by doubling, then shrunk by a copy, it was for a
/// moment up to three times its size.
fn expected_size(bytes: &[u8], limit: u64) -> usize {
    /// Deflate expands at most about 1032 to 1.
    const MOST_EXPANSION: u64 = 1032;
    let Some(trailer) = bytes.len().checked_sub(4).and_then(|at| bytes.get(at..)) else {
        return 0;
    };
    let stated = u32::from_le_bytes(trailer.try_into().expect("four bytes")) as u64;
    let most = (bytes.len() as u64).saturating_mul(MOST_EXPANSION).min(limit);
    usize::try_from(stated.min(most)).unwrap_or(0)
}

/// At most this many entries in an archive (a million empty files is an archive too).
pub const MAX_TAR_ENTRIES: usize = 10_000;

/// The regular files of a tar archive read from `reader` (decompress first if need be), by
/// path without a leading `./`; at most `limit` bytes and [`MAX_TAR_ENTRIES`] entries in all.
/// Each entry's real size (a PAX `size` record overrides the ustar field) is counted before it
/// is read, and reading stops at the limit whatever the headers said. Paths that climb out
/// (`..`) or are absolute are refused.
pub fn untar(reader: impl Read, limit: u64) -> Result<std::collections::BTreeMap<String, Vec<u8>>, String> {
    // tar reads PAX and GNU long-name extensions whole, as their headers say, before any entry
    // is seen: the stream itself is bounded (the files, and a header block or two per entry).
    let headers = 2 * 512 * MAX_TAR_ENTRIES as u64;
    let mut archive = tar::Archive::new(reader.take(limit.saturating_add(headers).saturating_add(1 << 20)));
    let mut files = std::collections::BTreeMap::new();
    let mut total = 0u64;
    for (count, entry) in archive.entries().map_err(|e| format!("not a tar archive: {e}"))?.enumerate() {
        if count >= MAX_TAR_ENTRIES {
            return Err(format!("the archive holds more than {MAX_TAR_ENTRIES} entries"));
        }
        let entry = entry.map_err(|e| format!("a damaged tar entry: {e}"))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(|e| format!("a tar entry with a bad path: {e}"))?.into_owned();
        let text = path.to_string_lossy().trim_start_matches("./").to_string();
        if path.is_absolute() || text.split('/').any(|part| part == "..") {
            return Err(format!("the archive entry {text:?} points outside the archive"));
        }
        // The size the entry will read (PAX included), checked before reading; the read itself
        // is bounded too.
        total = total.saturating_add(entry.size());
        if total > limit {
            return Err(format!("the archive holds more than {limit} bytes"));
        }
        let mut data = Vec::new();
        let allowed = limit - (total - entry.size());
        entry.take(allowed + 1).read_to_end(&mut data).map_err(|e| format!("{text}: {e}"))?;
        if data.len() as u64 > allowed {
            return Err(format!("the archive holds more than {limit} bytes"));
        }
        files.insert(text, data);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A reader that counts what was read through it.
    struct Counted<R>(R, std::rc::Rc<std::cell::Cell<u64>>);

    impl<R: Read> Read for Counted<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.read(buf)?;
            self.1.set(self.1.get() + n as u64);
            Ok(n)
        }
    }

    #[test]
    fn an_extension_header_as_large_as_it_claims_is_read_only_to_the_bound() {
        // A PAX header that says it holds 2 GiB (of zeros, which gzip packs to almost nothing):
        // tar would read it whole into memory before any entry.
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::XHeader);
        header.set_path("pax").unwrap();
        header.set_size(2 << 30);
        header.set_cksum();
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let stream = std::io::Cursor::new(header.as_bytes().to_vec()).chain(std::io::repeat(0).take(2 << 30));
        let refused = untar(Counted(stream, read.clone()), 1 << 20);
        assert!(refused.is_err(), "a damaged archive");
        assert!(read.get() < 64 << 20, "read {} bytes of a 1 MiB archive", read.get());
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn a_pax_size_cannot_slip_past_the_limit() {
        // The ustar field says 10 bytes; the PAX record, which readers obey, says a megabyte.
        let mut builder = tar::Builder::new(Vec::new());
        builder.append_pax_extensions([("size", b"1000000".as_slice())]).unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_path("components.yaml").unwrap();
        header.set_size(10);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        builder.append(&header, vec![b'x'; 1_000_000].as_slice()).unwrap();
        let archive = builder.into_inner().unwrap();
        let refused = untar(archive.as_slice(), 1000).unwrap_err();
        assert_eq!(refused, "the archive holds more than 1000 bytes");
    }

    #[test]
    fn entries_are_counted() {
        let mut builder = tar::Builder::new(Vec::new());
        for i in 0..=MAX_TAR_ENTRIES {
            let mut header = tar::Header::new_ustar();
            header.set_size(0);
            header.set_entry_type(tar::EntryType::Directory);
            builder.append_data(&mut header, format!("d{i}/"), std::io::empty()).unwrap();
        }
        let archive = builder.into_inner().unwrap();
        assert_eq!(
            untar(archive.as_slice(), 1 << 20).unwrap_err(),
            "the archive holds more than 10000 entries"
        );
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
    fn gunzip_reads_into_the_size_the_trailer_gives() {
        let text: Vec<u8> = (0..300_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let packed = gzip(&text);
        assert_eq!(expected_size(&packed, 10 << 20), text.len(), "read into room of its size");
        assert_eq!(gunzip(&packed, 10 << 20, "x").unwrap(), text);

        // Two members (as `cat a.gz b.gz` makes): both are read, though the trailer names the last.
        let mut two = gzip(&text);
        two.extend(gzip(b"tail"));
        let out = gunzip(&two, 10 << 20, "x").unwrap();
        assert_eq!(out.len(), text.len() + 4);
        assert!(out.ends_with(b"tail"));

        // A trailer that lies is only a size to start from: the limit still holds.
        let mut forged = gzip(&text);
        let at = forged.len() - 4;
        forged[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(gunzip(&forged, 10 << 20, "x").is_err(), "the checksum and size no longer match");
        assert_eq!(expected_size(&forged, 1 << 20), 1 << 20, "within the limit");
        assert_eq!(expected_size(&forged[..40], u64::MAX), 40 * 1032, "within what deflate can expand");
        assert_eq!(expected_size(b"gz", 100), 0);
    }

    #[test]
    fn json_is_hashed_as_its_text_would_be() {
        let value = serde_json::json!({"b": [1, "two"], "a": {"c": null}});
        assert_eq!(sha256_json_hex(&value), sha256_hex(value.to_string().as_bytes()));
    }

    #[test]
    fn sha256_of_empty_input() {
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
