//! The packaged chart (`butler-operator-X.Y.Z.tgz`), as `helm package` makes it: a gzipped tar
//! of the chart's folder under its name, its generated files at the release's version. Written
//! here so that `make release` needs no helm; the same bytes for the same inputs.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::{NAME, generated_files};

/// Every file of the chart in `dir` (hand-written), by path inside the chart.
fn read_tree(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            read_tree(&entry.path(), &format!("{name}/"), out)?;
        } else {
            out.insert(name, std::fs::read(entry.path())?);
        }
    }
    Ok(())
}

/// The chart in `dir` packaged at `version`: its file name and bytes.
pub fn package(dir: &Path, version: &str) -> io::Result<(String, Vec<u8>)> {
    let mut files = BTreeMap::new();
    read_tree(dir, "", &mut files)?;
    // The generated files of this version replace the committed ones (a CRD file gone from the
    // code goes from the package too).
    files.retain(|name, _| !name.starts_with("crds/"));
    for (name, text) in generated_files(version) {
        files.insert(name, text.into_bytes());
    }
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    tar.mode(tar::HeaderMode::Deterministic);
    for (name, bytes) in &files {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, format!("{NAME}/{name}"), bytes.as_slice())?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    let bytes = gz.finish()?;
    Ok((format!("{NAME}-{}.tgz", version.trim_start_matches('v')), bytes))
}
