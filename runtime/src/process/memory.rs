//! What the process's allocator keeps. glibc gives each thread that ever allocated an arena of
//! its own (up to 8 per core), and each keeps the pages its frees left: a controller at rest
//! held about twice what it used, and an operator rendering a megabyte release on one worker
//! thread and applying it on another peaked at half again what it used.

/// Limits the allocator to `arenas` arenas and gives free pages back to the system every few
/// seconds. Call it first thing in `main`, before any other thread starts.
pub fn limit_allocator(arenas: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: called before any other thread starts; it only limits future arenas.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    std::thread::Builder::new()
        .name("malloc-trim".into())
        .spawn(|| {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(5));
                // SAFETY: malloc_trim only releases free pages of the allocator's own heap.
                unsafe {
                    libc::malloc_trim(0);
                }
            }
        })
        .map(|_| ())
        .unwrap_or_else(|e| tracing::warn!(error = %e, "cannot start the thread that returns free memory"));
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = arenas;
}
