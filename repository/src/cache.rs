//! The on-disk response cache: each URL's body with its ETag and Last-Modified, so repeated
//! fetches become conditional requests (304 Not Modified), and an offline mode can serve from
//! it alone. Writes go to a temporary file renamed into place, and the metadata records the
//! body's digest, so concurrent processes never see a torn entry.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::digest::sha256_hex;
use crate::error::RepositoryError;

/// A cache folder and how long entries are trusted.
#[derive(Debug, Clone)]
pub struct Cache {
    dir: PathBuf,
    max_age: Duration,
}

/// A cached response.
#[derive(Debug, Clone)]
pub struct Entry {
    pub body: Vec<u8>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// The `Link` header (GitHub's pagination), kept for 304 answers.
    pub link: Option<String>,
    pub age: Duration,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    url: String,
    etag: Option<String>,
    last_modified: Option<String>,
    link: Option<String>,
    stored_at: u64,
    sha256: String,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

impl Cache {
    /// A cache in `dir`; entries older than `max_age` are fetched again unconditionally.
    pub fn new(dir: impl Into<PathBuf>, max_age: Duration) -> Cache {
        Cache { dir: dir.into(), max_age }
    }

    /// `$BUTLER_CACHE_DIR`, else the user's cache folder (`$XDG_CACHE_HOME` or `~/.cache`)
    /// followed by `butler`; with neither, a folder of this user's own in the temporary folder
    /// (`butler-{uid}`), which [`Cache::store`] refuses unless this user made it, private.
    pub fn default_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("BUTLER_CACHE_DIR") {
            return PathBuf::from(dir);
        }
        let base = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".cache"))
        });
        match base {
            Some(base) => base.join("butler"),
            None => std::env::temp_dir().join(format!("butler-{}", current_uid().unwrap_or_default())),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn max_age(&self) -> Duration {
        self.max_age
    }

    fn paths(&self, url: &str) -> (PathBuf, PathBuf) {
        let key = sha256_hex(url.as_bytes());
        (self.dir.join(format!("{key}.body")), self.dir.join(format!("{key}.json")))
    }

    /// The cached response of `url`, whatever its age; none from a folder that another user
    /// owns or others may write (whoever could write there could plant what is then applied).
    pub fn lookup(&self, url: &str) -> Option<Entry> {
        if check_private(&self.dir).is_err() {
            return None;
        }
        let (body_path, meta_path) = self.paths(url);
        let meta: Meta = serde_json::from_slice(&std::fs::read(meta_path).ok()?).ok()?;
        let body = std::fs::read(body_path).ok()?;
        if meta.url != url || sha256_hex(&body) != meta.sha256 {
            return None; // Another process is between its two renames, or the files are damaged.
        }
        Some(Entry {
            body,
            etag: meta.etag,
            last_modified: meta.last_modified,
            link: meta.link,
            age: Duration::from_secs(now_secs().saturating_sub(meta.stored_at)),
        })
    }

    /// Stores a response of `url`.
    pub fn store(
        &self,
        url: &str,
        body: &[u8],
        etag: Option<&str>,
        last_modified: Option<&str>,
        link: Option<&str>,
    ) -> Result<(), RepositoryError> {
        let (body_path, meta_path) = self.paths(url);
        let meta = Meta {
            url: url.to_string(),
            etag: etag.map(String::from),
            last_modified: last_modified.map(String::from),
            link: link.map(String::from),
            stored_at: now_secs(),
            sha256: sha256_hex(body),
        };
        ensure_private(&self.dir)?;
        write_atomically(&body_path, body)?;
        write_atomically(&meta_path, &serde_json::to_vec(&meta).expect("cache metadata serializes"))?;
        self.prune_now_and_then();
        Ok(())
    }

    /// At most once an hour: removes entries stored more than [`KEEP_FOR`] (or four times the
    /// trusted age, if longer) ago, and temporary files a stopped process left, so that the
    /// folder does not grow for ever with versions and pages no one asks for again.
    fn prune_now_and_then(&self) {
        let marker = self.dir.join(".pruned");
        let recent = std::fs::metadata(&marker)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < PRUNE_EVERY);
        if recent || std::fs::write(&marker, b"").is_err() {
            return;
        }
        self.prune(now_secs());
    }

    /// Removes what [`Cache::prune_now_and_then`] removes, as of `now` (seconds).
    fn prune(&self, now: u64) {
        let keep = KEEP_FOR.max(self.max_age * 4).as_secs();
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            let stale = if name.ends_with(".tmp") {
                entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|a| a > PRUNE_EVERY)
            } else if name.ends_with(".json") {
                let stored = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice::<Meta>(&b).ok());
                stored.is_none_or(|m| now.saturating_sub(m.stored_at) > keep)
            } else {
                false
            };
            if stale {
                let _ = std::fs::remove_file(&path);
                if let Some(stem) = name.strip_suffix(".json") {
                    let _ = std::fs::remove_file(self.dir.join(format!("{stem}.body")));
                }
            }
        }
    }

    /// Marks the entry of `url` as fresh (after a 304).
    pub fn touch(&self, url: &str) -> Result<(), RepositoryError> {
        match self.lookup(url) {
            Some(e) => {
                self.store(url, &e.body, e.etag.as_deref(), e.last_modified.as_deref(), e.link.as_deref())
            }
            None => Ok(()),
        }
    }
}

/// The user this process runs as (the owner of `/proc/self`).
fn current_uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// How long an entry stays on disk at least.
const KEEP_FOR: Duration = Duration::from_secs(7 * 24 * 3600);
/// How often a store looks for what to remove.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Makes the cache folder (0700) if need be, and refuses one that another user owns or that
/// others may write: whoever could write there could plant what the operator then applies.
fn ensure_private(dir: &Path) -> Result<(), RepositoryError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(|e| io(dir, e))?;
    check_private(dir)
}

/// Refuses a cache folder that another user owns or that others may write.
fn check_private(dir: &Path) -> Result<(), RepositoryError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(|e| io(dir, e))?;
    let refuse = |why: String| RepositoryError::Io {
        path: dir.to_path_buf(),
        message: format!(
            "{why}; make it this user's with mode 700, or choose another folder (--cache-dir, BUTLER_CACHE_DIR)"
        ),
    };
    if let Some(me) = current_uid()
        && meta.uid() != me
    {
        return Err(refuse(format!(
            "the cache folder belongs to the user {}, not to this process's {me}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse(format!(
            "the cache folder may be written by others (mode {:o})",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

fn io(path: &Path, e: std::io::Error) -> RepositoryError {
    RepositoryError::Io { path: path.to_path_buf(), message: e.to_string() }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RepositoryError> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    let temp = path.with_extension(format!("{}.{nanos}.tmp", std::process::id()));
    std::fs::write(&temp, bytes).map_err(|e| io(&temp, e))?;
    std::fs::rename(&temp, path).map_err(|e| io(path, e))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_folder_others_may_write_or_own_is_refused_and_a_new_one_is_private() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let root = tempfile::tempdir().unwrap();
        let fresh = root.path().join("fresh/butler");
        Cache::new(&fresh, Duration::from_secs(60)).store("u", b"x", None, None, None).unwrap();
        assert_eq!(std::fs::metadata(&fresh).unwrap().mode() & 0o777, 0o700);
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused =
            Cache::new(&open, Duration::from_secs(60)).store("u", b"x", None, None, None).unwrap_err();
        assert!(refused.to_string().contains("may be written by others (mode 777)"), "{refused}");
        // Another user's folder (only root can make one here).
        let theirs = root.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
        if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok() {
            let refused =
                Cache::new(&theirs, Duration::from_secs(60)).store("u", b"x", None, None, None).unwrap_err();
            assert!(refused.to_string().contains("belongs to the user 65534"), "{refused}");
        }
    }

    use super::*;

    #[test]
    fn a_folder_others_may_write_is_never_read_and_old_entries_go() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), Duration::from_secs(60));
        cache.store("https://x/planted", b"body", None, None, None).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(cache.lookup("https://x/planted").is_none(), "a folder anyone may write is no cache");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(cache.lookup("https://x/planted").is_some());
        cache.store("https://x/fresh", b"new", None, None, None).unwrap();
        cache.prune(now_secs() + KEEP_FOR.as_secs() / 2);
        assert!(cache.lookup("https://x/planted").is_some(), "kept for a week");
        cache.prune(now_secs() + KEEP_FOR.as_secs() + 10);
        assert!(cache.lookup("https://x/planted").is_none() && cache.lookup("https://x/fresh").is_none());
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from(".pruned")], "bodies go with their metadata");
    }

    #[test]
    fn entries_round_trip_and_a_torn_pair_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(dir.path(), Duration::from_secs(60));
        assert!(cache.lookup("https://x/a").is_none());
        cache.store("https://x/a", b"body", Some("\"e1\""), None, None).unwrap();
        let entry = cache.lookup("https://x/a").unwrap();
        assert_eq!((entry.body.as_slice(), entry.etag.as_deref()), (&b"body"[..], Some("\"e1\"")));
        let (body, _) = cache.paths("https://x/a");
        std::fs::write(body, b"other").unwrap();
        assert!(cache.lookup("https://x/a").is_none());
    }
}
