//! Table tests for every rule of the allocator, edges included.

use std::net::IpAddr;

use butler_core::ipam::{Allocation, IpamError, Pool, PoolSpec, PoolStats};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn pool(cidr: &str) -> Pool {
    Pool::new(PoolSpec::new(cidr.parse().unwrap())).unwrap()
}

fn text(a: Result<Allocation, IpamError>) -> String {
    match a {
        Ok(a) => a.to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// A /24 shaped so that its free blocks are .10-.13 (4), .20-.21 (2), .30-.33 (4), .40-.55 (16).
fn shaped() -> Pool {
    let mut p = Pool::new(
        PoolSpec::new("10.0.0.0/24".parse().unwrap()).with_allocatable(ip("10.0.0.10"), ip("10.0.0.55")),
    )
    .unwrap();
    for (s, e) in [("10.0.0.14", "10.0.0.19"), ("10.0.0.22", "10.0.0.29"), ("10.0.0.34", "10.0.0.39")] {
        p.insert_existing(ip(s), ip(e)).unwrap();
    }
    p
}

#[test]
fn best_fit_takes_the_smallest_block_that_holds_the_request() {
    assert_eq!(text(shaped().allocate(2)), "10.0.0.20/31");
    assert_eq!(text(shaped().allocate(3)), "10.0.0.10-10.0.0.12"); // the two 4-blocks tie: lowest wins
    assert_eq!(text(shaped().allocate(4)), "10.0.0.10-10.0.0.13");
    assert_eq!(text(shaped().allocate(5)), "10.0.0.40-10.0.0.44");
    assert_eq!(text(shaped().allocate(16)), "10.0.0.40-10.0.0.55");
}

#[test]
fn allocations_start_at_the_start_of_their_block_and_fill_it() {
    let mut p = shaped();
    let got: Vec<String> = (0..4).map(|_| text(p.allocate(1))).collect();
    assert_eq!(got, ["10.0.0.20/32", "10.0.0.21/32", "10.0.0.10/32", "10.0.0.11/32"]);
}

#[test]
fn refusals_say_which_case_they_are() {
    let mut p = shaped();
    assert_eq!(p.allocate(0), Err(IpamError::CountBelowOne { count: 0 }));
    assert_eq!(p.allocate(27), Err(IpamError::Exhausted { requested: 27, available: 26 }));
    assert_eq!(
        p.allocate(17),
        Err(IpamError::Fragmented { requested: 17, available: 26, largest_free_block: 16 })
    );
    assert_eq!(
        p.allocate(17).unwrap_err().to_string(),
        "the pool is fragmented: 17 addresses asked and 26 free, but the largest free block holds 16; ask for fewer or add a pool"
    );
}

#[test]
fn pinned_ranges_are_checked_against_range_reserved_and_allocations() {
    let spec = PoolSpec::new("10.40.0.0/22".parse().unwrap())
        .with_allocatable(ip("10.40.0.0"), ip("10.40.3.254"))
        .with_reserved("10.40.0.0/28".parse().unwrap())
        .with_reserved("10.40.2.16/28".parse().unwrap());
    let mut p = Pool::new(spec).unwrap();
    p.allocate_pinned(ip("10.40.1.0"), ip("10.40.1.7")).unwrap();
    let cases = [
        (("10.40.2.0", "10.40.2.7"), "10.40.2.0/29"),
        (("10.40.1.8", "10.40.1.15"), "10.40.1.8/29"), // touches the first pinned range: fine
        (("10.40.2.8", "10.40.2.15"), "10.40.2.8/29"), // touches a reserved range: fine
        (
            ("10.40.2.7", "10.40.2.3"),
            "error: 10.40.2.7-10.40.2.3 is not a range: its start comes after its end",
        ),
        (
            ("10.40.3.250", "10.40.3.255"),
            "error: 10.40.3.250-10.40.3.255 is outside the pool's allocatable range 10.40.0.0-10.40.3.254",
        ),
        (("10.40.4.0", "10.40.4.1"), "error: 10.40.4.0-10.40.4.1 is outside the pool 10.40.0.0/22"),
        (
            ("10.40.0.12", "10.40.0.20"),
            "error: 10.40.0.12-10.40.0.20 conflicts with reserved range 10.40.0.0/28 at address 10.40.0.12",
        ),
        (
            ("10.40.0.250", "10.40.1.2"),
            "error: 10.40.0.250-10.40.1.2 conflicts with allocation 10.40.1.0/29 at address 10.40.1.0",
        ),
        (
            ("10.40.2.20", "10.40.2.40"),
            "error: 10.40.2.20-10.40.2.40 conflicts with reserved range 10.40.2.16/28 at address 10.40.2.20",
        ),
        (
            ("10.40.1.4", "10.40.2.20"), // both: the lower address is reported
            "error: 10.40.1.4-10.40.2.20 conflicts with allocation 10.40.1.0/29 at address 10.40.1.4",
        ),
        (
            ("::1", "::2"),
            "error: start ::1 is IPv6, but the pool 10.40.0.0/22 is IPv4: a pool holds addresses of one family only",
        ),
    ];
    for ((s, e), expect) in cases {
        assert_eq!(text(p.allocate_pinned(ip(s), ip(e))), expect, "{s}-{e}");
    }
}

#[test]
fn release_takes_exactly_one_allocation_and_merges_free_space() {
    let mut p = pool("10.0.0.0/28");
    let a = p.allocate(4).unwrap();
    let b = p.allocate(4).unwrap();
    let c = p.allocate(4).unwrap();
    assert_eq!(p.stats().free_blocks, 1);
    assert_eq!(
        p.release(ip("10.0.0.4"), ip("10.0.0.5")),
        Err(IpamError::NotAllocated { start: ip("10.0.0.4"), end: ip("10.0.0.5") })
    );
    assert_eq!(
        p.release(ip("10.0.1.0"), ip("10.0.1.3")).unwrap_err().to_string(),
        "10.0.1.0-10.0.1.3 is not an allocation of this pool"
    );
    p.release(a.start(), a.end()).unwrap();
    p.release(c.start(), c.end()).unwrap();
    assert_eq!(p.stats().free_blocks, 2); // .0-.3 and .8-.15
    assert_eq!(p.stats().fragmentation_percent, 34); // 100 - floor(8 * 100 / 12)
    p.release(b.start(), b.end()).unwrap();
    assert_eq!(
        p.stats(),
        PoolStats { total: 16, available: 16, largest_free_block: 16, free_blocks: 1, ..Default::default() }
    );
    assert!(p.release(b.start(), b.end()).is_err(), "a second release is refused");
}

#[test]
fn existing_allocations_are_loaded_and_an_overlap_is_reported() {
    let mut p = Pool::new(
        PoolSpec::new("10.0.0.0/24".parse().unwrap()).with_reserved("10.0.0.0/28".parse().unwrap()),
    )
    .unwrap();
    p.insert_existing(ip("10.0.0.16"), ip("10.0.0.31")).unwrap();
    assert_eq!(
        text(p.insert_existing(ip("10.0.0.30"), ip("10.0.0.40"))),
        "error: 10.0.0.30-10.0.0.40 conflicts with allocation 10.0.0.16/28 at address 10.0.0.30"
    );
    // The spec changed since this one was made: it is kept, and its addresses stay taken.
    p.insert_existing(ip("10.0.0.8"), ip("10.0.0.15")).unwrap();
    assert!(p.check_range(ip("10.0.0.8"), ip("10.0.0.15")).is_err());
    assert_eq!(p.stats().allocated, 16);
    assert_eq!(p.stats().allocations, 2);
    assert_eq!(text(p.allocate(1)), "10.0.0.32/32");
    // Releasing it frees only what the spec allows.
    p.release(ip("10.0.0.8"), ip("10.0.0.15")).unwrap();
    assert_eq!(p.stats().available, 240 - 16 - 1);
}

#[test]
fn statistics_follow_the_documents_rules() {
    let spec = PoolSpec::new("10.40.0.0/21".parse().unwrap())
        .with_allocatable(ip("10.40.1.0"), ip("10.40.7.254"))
        .with_reserved("10.40.0.0/28".parse().unwrap())
        .with_reserved("10.40.0.16/28".parse().unwrap());
    assert_eq!(Pool::new(spec).unwrap().stats().total, 1791);
    let spec = PoolSpec::new("10.40.0.0/22".parse().unwrap())
        .with_allocatable(ip("10.40.1.0"), ip("10.40.3.254"))
        .with_reserved("10.40.0.0/28".parse().unwrap());
    assert_eq!(Pool::new(spec).unwrap().stats().total, 767);
    // Overlapping reservations count once; the part outside the allocatable range not at all.
    let spec = PoolSpec::new("10.0.0.0/24".parse().unwrap())
        .with_allocatable(ip("10.0.0.8"), ip("10.0.0.255"))
        .with_reserved("10.0.0.0/27".parse().unwrap())
        .with_reserved("10.0.0.16/28".parse().unwrap())
        .with_reserved("10.0.0.24/29".parse().unwrap());
    let p = Pool::new(spec).unwrap();
    assert_eq!(p.stats().total, 256 - 32);
    assert_eq!(p.stats().free_blocks, 1);
}

#[test]
fn a_one_address_pool_works() {
    let mut p = pool("10.0.0.5/32");
    assert_eq!(text(p.allocate(1)), "10.0.0.5/32");
    assert_eq!(p.allocate(1), Err(IpamError::Exhausted { requested: 1, available: 0 }));
    p.release(ip("10.0.0.5"), ip("10.0.0.5")).unwrap();
    assert_eq!(p.stats().available, 1);
}

#[test]
fn the_last_address_of_each_family_is_an_ordinary_address() {
    for (cidr, last) in [
        ("255.255.255.0/24", "255.255.255.255"),
        ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ff00/120", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
    ] {
        let mut p = pool(cidr);
        let all = p.allocate(256).unwrap();
        assert_eq!(all.end(), ip(last));
        assert_eq!(all.to_string(), cidr);
        assert!(p.allocate(1).is_err());
        p.release(all.start(), all.end()).unwrap();
        let top = p.allocate_pinned(ip(last), ip(last)).unwrap();
        assert_eq!(p.stats().free_blocks, 1);
        p.release(top.start(), top.end()).unwrap();
        assert_eq!(p.stats().largest_free_block, 256);
        let mut whole = pool(if cidr.contains(':') { "8000::/1" } else { "0.0.0.0/0" });
        let n = whole.stats().total;
        assert_eq!(whole.allocate(n).unwrap().count(), n);
        assert_eq!(whole.stats().available, 0);
    }
}

#[test]
fn a_full_pool_and_a_pool_covered_by_reservations() {
    let mut p = pool("10.0.0.0/30");
    for _ in 0..4 {
        p.allocate(1).unwrap();
    }
    assert_eq!(p.stats(), PoolStats { total: 4, allocated: 4, allocations: 4, ..Default::default() });
    assert_eq!(p.allocate(1), Err(IpamError::Exhausted { requested: 1, available: 0 }));

    let covered = PoolSpec::new("10.0.0.0/24".parse().unwrap())
        .with_reserved("10.0.0.0/25".parse().unwrap())
        .with_reserved("10.0.0.128/25".parse().unwrap());
    let mut p = Pool::new(covered).unwrap();
    assert_eq!(p.stats(), PoolStats::default());
    assert_eq!(p.allocate(1), Err(IpamError::Exhausted { requested: 1, available: 0 }));
}

#[test]
fn large_pools_are_ordinary() {
    let mut v4 = pool("10.0.0.0/8");
    assert_eq!(v4.stats().total, 1 << 24);
    let mut v6 = pool("2001:db8::/64");
    assert_eq!(v6.stats().total, 1 << 64);
    for _ in 0..10_000 {
        v4.allocate(8).unwrap();
        v6.allocate(8).unwrap();
    }
    assert_eq!(v6.stats().available, (1u128 << 64) - 80_000);
    // From the start of the free block (after 80,000 addresses), so not a CIDR.
    assert_eq!(text(v6.allocate(1 << 63)), "2001:db8::1:3880-2001:db8::8000:0:1:387f");
    let mut v6_48 = pool("2001:db8::/48");
    assert_eq!(v6_48.stats().total, 1 << 80);
    assert_eq!(text(v6_48.allocate(1 << 79)), "2001:db8::/49");
}

#[test]
fn families_never_mix_and_bad_specs_are_refused() {
    let v4 = || PoolSpec::new("10.0.0.0/24".parse().unwrap());
    let cases: Vec<(PoolSpec, &str)> = vec![
        (
            v4().with_reserved("2001:db8::/64".parse().unwrap()),
            "reserved range 2001:db8::/64 is IPv6, but the pool 10.0.0.0/24 is IPv4",
        ),
        (v4().with_allocatable(ip("::1"), ip("::2")), "allocatable start ::1 is IPv6"),
        (v4().with_allocatable(ip("10.0.0.9"), ip("10.0.0.1")), "10.0.0.9-10.0.0.1 is not a range"),
        (
            v4().with_allocatable(ip("10.0.0.1"), ip("10.0.1.1")),
            "the allocatable range 10.0.0.1-10.0.1.1 is not inside the pool 10.0.0.0/24",
        ),
        (PoolSpec::new("::/0".parse().unwrap()), "the pool ::/0 is too large"),
    ];
    for (spec, expect) in cases {
        let err = Pool::new(spec).err().expect("refused").to_string();
        assert!(err.starts_with(expect), "{err}");
    }
    let mut p = Pool::new(v4()).unwrap();
    assert!(matches!(p.insert_existing(ip("::1"), ip("::1")), Err(IpamError::FamilyMismatch { .. })));
    assert!(matches!(p.release(ip("::1"), ip("::1")), Err(IpamError::FamilyMismatch { .. })));
    assert_eq!(
        Pool::new(PoolSpec::new("10.0.0.7/24".parse().unwrap())).unwrap().cidr().to_string(),
        "10.0.0.0/24"
    );
}
